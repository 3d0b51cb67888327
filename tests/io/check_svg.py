"""Parses an SVG written by oar::io (include/oar/io/svg_plot.hpp) with xml.etree and prints what
tests/io/test_svg_plot.cpp checks, one item per line (texts as UTF-8 hex, `-` when empty):

  root <tag>                        the root element, without namespace
  size <width> <height>
  title <hex>
  panel <i> <hex>                   each <g class="panel">, in order
  curve <i> <stroke> <x,y> ...      each polyline of class "curve" in panel i
  marker <i> <fill> <cx> <cy>
  legend <i> <hex>
  tick <i> x|y <label>              tick labels (x: anchored middle, y: anchored end)
  nodata <i>
  bad_number <attribute> <value>    any coordinate attribute that is not a finite number
A file that is not well-formed XML makes xml.etree raise, and the script exits non-zero.
"""
import math
import sys
import xml.etree.ElementTree as ET

NS = "{http://www.w3.org/2000/svg}"
NUMERIC = ("x", "y", "x1", "y1", "x2", "y2", "cx", "cy", "r", "width", "height", "stroke-width", "font-size")


def h(text):
    return (text or "").encode("utf-8").hex() or "-"


def local(tag):
    return tag[len(NS):] if tag.startswith(NS) else tag


root = ET.parse(sys.argv[1]).getroot()
print("root", local(root.tag))
print("size", root.get("width"), root.get("height"))
for el in root.iter():
    for attr in NUMERIC:
        v = el.get(attr)
        if v is not None:
            try:
                ok = math.isfinite(float(v))
            except ValueError:
                ok = False
            if not ok:
                print("bad_number", attr, v)
    if el.get("points") is not None:
        for pair in el.get("points").split():
            xs = pair.split(",")
            if len(xs) != 2 or not all(math.isfinite(float(t)) for t in xs):
                print("bad_number points", pair)
for el in root:
    if local(el.tag) == "text" and el.get("class") == "title":
        print("title", h(el.text))
panels = [g for g in root if local(g.tag) == "g" and g.get("class") == "panel"]
for i, g in enumerate(panels):
    for el in g.iter():
        cls, tag = el.get("class"), local(el.tag)
        if tag == "text" and cls == "panel-title":
            print("panel", i, h(el.text))
        elif tag == "polyline" and cls == "curve":
            print("curve", i, el.get("stroke"), " ".join(
                "%r,%r" % tuple(float(t) for t in p.split(",")) for p in el.get("points").split()))
        elif tag == "circle" and cls == "marker":
            print("marker", i, el.get("fill"), float(el.get("cx")), float(el.get("cy")))
        elif tag == "text" and cls == "legend":
            print("legend", i, h(el.text))
        elif tag == "text" and cls == "tick":
            print("tick", i, "x" if el.get("text-anchor") == "middle" else "y", el.text)
        elif tag == "text" and cls == "no-data":
            print("nodata", i)

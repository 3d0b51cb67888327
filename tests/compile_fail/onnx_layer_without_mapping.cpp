// export_onnx of a network holding a layer with no oar::onnx_op specialisation: the layer's index
// and type are named.
// first-error: oar: export_onnx: a layer has no ONNX mapping
// expect: onnx_layer_without_mapping<2, {anonymous}::Doubler>|onnx_layer_without_mapping<2, \(anonymous namespace\)::Doubler>
#include <oar/io/onnx.hpp>

namespace {
/// A user's layer (y = 2x) that works in a network but says nothing about ONNX.
struct Doubler : oar::detail::copy_layer {
    static constexpr std::string_view name = "Doubler";
    static constexpr oar::Dims output_dims(oar::Dims in) { return in; }
};
}  // namespace

void f(const oar::Network<oar::Sequential<oar::Flatten, oar::Linear<4, 3>, Doubler>, oar::Shape<4>>& net) {
    oar::export_onnx(net, "model.onnx");
}

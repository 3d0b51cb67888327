#!/usr/bin/env bash
# Runs the README's main-job command on a fresh Debian 12 system as a new user would: debootstraps
# bookworm into a folder, clones this repository into it, runs `scripts/run_main.sh --epochs 1`
# once as a non-root user without sudo (expected: the apt-get line to run, exit 1) and once as
# root (installs what the main job needs, builds train_mnist, trains one epoch), then checks that
# neither Chromium, libtorch nor torch was installed. Prints what was installed, the time and the
# result line; the whole transcript goes to fresh_debian_main_job.log beside <root>.
# Not run by CI: it needs root, Debian's mirrors and about 1.5 GB of disk.
#
#   tools/fresh_debian_main_job.sh [ROOT [REF]]   ROOT: the chroot folder (default
#                                                 /tmp/oar-fresh-bookworm, removed first when it
#                                                 exists); REF: the commit to clone (default HEAD)
# Environment: OAR_MIRROR (default http://deb.debian.org/debian), CMAKE_BUILD_PARALLEL_LEVEL
# (passed to run_main.sh's build; default 1).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
root="${1:-/tmp/oar-fresh-bookworm}"
ref="${2:-HEAD}"
mirror="${OAR_MIRROR:-http://deb.debian.org/debian}"
jobs="${CMAKE_BUILD_PARALLEL_LEVEL:-1}"
out="$(dirname "$root")"
log="$out/fresh_debian_main_job.log"

[[ "$(id -u)" -eq 0 ]] || { echo "fresh_debian: error: needs root (debootstrap, chroot, mounts)" >&2; exit 1; }
command -v debootstrap >/dev/null ||
  { echo "fresh_debian: error: debootstrap missing; apt-get install -y debootstrap" >&2; exit 1; }
commit="$(git -C "$repo" rev-parse --verify "$ref^{commit}")"

mounts=()
cleanup() {
  local i
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount -l "${mounts[i]}" 2>/dev/null || true; done
}
trap cleanup EXIT
mount_in() {  # mount_in TARGET ARGS...: mounts and remembers TARGET for the cleanup
  local target="$1"; shift
  mkdir -p "$target"
  mount "$@" "$target"
  mounts+=("$target")
}

exec > >(tee "$log") 2>&1
echo "fresh_debian: $(date -u '+%Y-%m-%d %H:%M UTC'), commit $commit, root $root"

if [[ -e "$root" ]]; then
  for m in dev/pts dev sys proc; do umount -l "$root/$m" 2>/dev/null || true; done
  rm -rf --one-file-system "$root"
fi
t0=$SECONDS
debootstrap --variant=minbase bookworm "$root" "$mirror" >/dev/null
echo "fresh_debian: debootstrap bookworm (minbase): $((SECONDS - t0)) s"
cp /etc/resolv.conf "$root/etc/resolv.conf"
echo "deb $mirror bookworm main" > "$root/etc/apt/sources.list"
mount_in "$root/proc" -t proc proc
mount_in "$root/sys" -t sysfs sys
mount_in "$root/dev" --bind /dev
mount_in "$root/dev/pts" --bind /dev/pts

in_root() { chroot "$root" env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 "$@"; }
as_user() { chroot --userspec=newuser:newuser "$root" env -i HOME=/home/newuser \
              PATH=/usr/bin:/bin LANG=C.UTF-8 bash -c "$1"; }

# The machine's state before anything of oar: git to clone with (a new user has it; it is not
# something the main job installs) and an ordinary user without sudo.
in_root bash -c 'apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends git ca-certificates >/dev/null'
in_root useradd -m -s /bin/bash newuser
git clone -q --bare --no-local "$repo" "$root/srv/oar.git"
git -C "$root/srv/oar.git" update-ref refs/heads/fresh "$commit"
git -C "$root/srv/oar.git" symbolic-ref HEAD refs/heads/fresh
in_root dpkg-query -W -f='${Package}\n' | sort > "$out/fresh_debian_before.txt"

echo "fresh_debian: --- as newuser (no root, no sudo) ---"
# (git refuses to serve a repository that another user owns: newuser clones from its own copy)
cp -a "$root/srv/oar.git" "$root/home/newuser/oar.git"
in_root chown -R newuser:newuser /home/newuser/oar.git
as_user 'cd && git clone -q oar.git oar && cd oar && scripts/run_main.sh --epochs 1; echo "exit status $?"'

echo "fresh_debian: --- as root ---"
in_root git clone -q /srv/oar.git /root/oar
t0=$SECONDS
set +e +o pipefail
in_root env CMAKE_BUILD_PARALLEL_LEVEL="$jobs" bash -c 'cd /root/oar && time scripts/run_main.sh --epochs 1' 2>&1 |
  tee "$out/fresh_debian_run.txt"
status=${PIPESTATUS[0]}
set -e -o pipefail
seconds=$((SECONDS - t0))

in_root dpkg-query -W -f='${Package}\n' | sort > "$out/fresh_debian_after.txt"
added="$(comm -13 "$out/fresh_debian_before.txt" "$out/fresh_debian_after.txt")"
echo "fresh_debian: run_main.sh exit status $status, $seconds s wall (apt-get, build with -j$jobs, training)"
echo "fresh_debian: packages installed by run_main.sh: $(wc -l <<<"$added")"
echo "fresh_debian: of them requested by setup.sh --main: $(grep -o 'installing: .*' "$out/fresh_debian_run.txt" | head -1)"
echo "fresh_debian: installed size: $(in_root dpkg-query -W -f='${Installed-Size}\t${Package}\n' $added |
  awk '{ s += $1 } END { printf "%.0f MB", s / 1024 }')"

# What must not be there: Chromium, libtorch, torch (Debian's or pip's), the test venv.
bad=$(grep -E '^(chromium|libtorch|python3-torch|libonnx|doctest)' <<<"$added" || true)
found=$(in_root bash -c 'ls -d /usr/lib/*/libtorch* /usr/lib/chromium* /usr/lib/python3/dist-packages/torch \
  /usr/local/lib/python3*/dist-packages/torch /root/oar/.venv 2>/dev/null' || true)
if [[ -n "$bad$found" ]]; then
  echo "fresh_debian: FAIL: the main job installed what only the tests need: $bad $found"
  exit 1
fi
echo "fresh_debian: absent: chromium, libtorch, torch, onnx, doctest, the .venv"
grep '^result:' "$out/fresh_debian_run.txt" || { echo "fresh_debian: FAIL: no result line"; exit 1; }
exit "$status"

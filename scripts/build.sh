#!/usr/bin/env bash
# Configure and build the release preset (build/release).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cmake --preset release
cmake --build --preset release -j2

#!/usr/bin/env bash
# Pack a wheelhouse into one xz archive that fits the device tool's 64 MiB carry:
#
#     bash tools/gpu_wheels_xz.sh [DIR]          # default .whl (../shared/gpu/wheelhouse.sh's)
#
# llvmlite's wheel is about 57 MiB (zip's deflate) and the checkout about 10 MiB, together over
# the limit; xz packs the same files into about 39 MiB. The archive holds each wheel's files as
# `pip install --no-deps --target` lays them out (wheels are zip files whose contents go into
# site-packages unchanged; llvmlite's own test suite is left out), and replaces the wheels in
# DIR. tools/gpu_session.sh unpacks DIR/*.tar.xz into its site folder (docs/python-api.md, "A
# GPU session"). Takes about 2 minutes on 2 cores.
set -euo pipefail
dir=${1:-.whl}
ls "$dir"/*.whl >/dev/null 2>&1 || { echo "gpu_wheels_xz: no wheels in $dir" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpu-wheels.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/site"
for w in "$dir"/*.whl; do
    python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' \
        "$w" "$tmp/site"
done
rm -rf "$tmp/site/llvmlite/tests"
tar -C "$tmp/site" -cf - . | xz -T0 -6 >"$tmp/site.tar.xz"
mv "$tmp/site.tar.xz" "$dir/site.tar.xz"
rm -f "$dir"/*.whl
ls -l "$dir"

#!/usr/bin/env bash
# Builds every release artifact of sluice for this platform from one build of the binary,
# then tests each one installed as a user would (tests/py/test_packages.py):
#
#   - the Python wheel (maturin, PyPI's `sluice-server`): the stripped binary and the pytest
#     plugin, tagged manylinux_2_34 after maturin's check that the binary needs no newer glibc;
#   - the npm packages, laid out as esbuild's and biome's are: `sluice-server` (the helper,
#     platform-neutral) and `@sluice-server/<os>-<cpu>` for this platform (only the binary,
#     with `os`/`cpu` set), packed with `npm pack`;
#   - the Debian package (`dpkg-deb --build` from a staged tree): /usr/bin/sluice, the systemd
#     unit, /etc/sluice/sluice.conf, /var/lib/sluice and a `sluice` system user made by postinst;
#   - the JUnit 5 extension's jar (java/build.sh; its tests run with Jedis against the binary).
#
# The container image is built from the Dockerfile (`docker build .`); tests/it/dockerfile.rs
# checks its build context.
#
#   scripts/package.sh                 release build, artifacts in target/package, then tests
#   scripts/package.sh --dev           the same from the dev profile (what scripts/test.sh runs:
#                                      same layout and checks, no optimised build)
#   scripts/package.sh --no-test       build only
#   scripts/package.sh --out DIR       artifacts in DIR
#
# Needs maturin (requirements.txt; $PYTHON or .venv's Python), node and npm, dpkg-deb, a JDK
# with Debian's junit5 (java/build.sh --check lists what is missing), and for the tests
# systemd-analyze and readelf (Debian: apt-get install systemd binutils).
#
# The wheel's binary is the one build: the npm and Debian packages take it out of the wheel, so
# they all carry the same bytes. (cargo also leaves that stripped binary in
# target/<profile>/sluice, until the next `cargo build` links the unstripped one back without
# recompiling.)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

profile=release
test=yes
out=target/package
while [ $# -gt 0 ]; do
    case "$1" in
        --dev) profile=dev ;;
        --no-test) test=no ;;
        --out) out=$2; shift ;;
        *) echo "usage: $0 [--dev] [--no-test] [--out DIR]" >&2; exit 2 ;;
    esac
    shift
done
if [ -z "${PYTHON:-}" ]; then
    if [ -x .venv/bin/python ]; then PYTHON=$ROOT/.venv/bin/python; else PYTHON=python3; fi
fi
# The manylinux tag: glibc 2.34 is the newest symbol version the binary uses when built on
# Debian 12 (glibc 2.36); maturin's --auditwheel check fails the build if it needs newer.
MANYLINUX=${MANYLINUX:-manylinux_2_34}

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n1)
for manifest in npm/package.json npm/platforms/*/package.json; do
    v=$(node -p "require('./$manifest').version")
    [ "$v" = "$version" ] || { echo "package.sh: $manifest has version $v, Cargo.toml $version" >&2; exit 1; }
done

mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -rf "$out"/*.whl "$out"/*.tgz "$out"/*.deb "$out"/*.jar "$out/stage"
mkdir -p "$out/stage"

# 1. The wheel: the one build (cargo's `profile`), stripped.
echo "package.sh: wheel ($profile profile, $MANYLINUX)"
(cd python && "$PYTHON" -m maturin build --profile "$profile" --locked --strip \
    --compatibility "$MANYLINUX" --auditwheel check --out "$out")
wheel=$(ls "$out"/sluice_server-"$version"-*.whl)
binary=$out/stage/sluice
"$PYTHON" - "$wheel" "sluice_server-$version.data/scripts/sluice" "$binary" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel, open(sys.argv[3], "wb") as out:
    out.write(wheel.read(sys.argv[2]))
PY
chmod 755 "$binary"

# 2. npm: the platform package for this machine (node's names for it), and the main one.
case "$(uname -s)-$(uname -m)" in
    Linux-x86_64) platform=linux-x64 ;;
    Linux-aarch64) platform=linux-arm64 ;;
    Darwin-x86_64) platform=darwin-x64 ;;
    Darwin-arm64) platform=darwin-arm64 ;;
    *) echo "package.sh: no npm platform package for $(uname -s)-$(uname -m)" >&2; exit 1 ;;
esac
echo "package.sh: npm packages (sluice-server, @sluice-server/$platform)"
cp -r "npm/platforms/$platform" "$out/stage/npm-$platform"
mkdir -p "$out/stage/npm-$platform/bin"
cp "$binary" "$out/stage/npm-$platform/bin/sluice"
# Copied without node_modules or the platform directories: exactly what `files` names.
mkdir -p "$out/stage/npm-main"
tar -C npm -c --exclude=node_modules --exclude=platforms --exclude=example . | tar -C "$out/stage/npm-main" -x
(cd "$out/stage/npm-$platform" && npm pack --silent --pack-destination "$out" >/dev/null)
(cd "$out/stage/npm-main" && npm pack --silent --pack-destination "$out" >/dev/null)

# 3. Debian: a staged tree, owned by root in the archive.
arch=$(dpkg --print-architecture)
deb_version="$version-1"
echo "package.sh: Debian package (sluice_${deb_version}_$arch.deb)"
tree=$out/stage/deb
install -D -m 755 "$binary" "$tree/usr/bin/sluice"
install -D -m 644 deploy/sluice.conf "$tree/etc/sluice/sluice.conf"
install -d -m 750 "$tree/var/lib/sluice"
# The unit as deploy/ has it, with the binary where the package puts it.
install -d "$tree/lib/systemd/system"
sed 's#^ExecStart=/usr/local/bin/sluice #ExecStart=/usr/bin/sluice #' deploy/sluice.service \
    >"$tree/lib/systemd/system/sluice.service"
grep -q '^ExecStart=/usr/bin/sluice ' "$tree/lib/systemd/system/sluice.service" \
    || { echo "package.sh: deploy/sluice.service's ExecStart is not /usr/local/bin/sluice …" >&2; exit 1; }
install -d "$tree/usr/share/doc/sluice"
{
    echo "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/"
    echo "Upstream-Name: sluice"
    echo
    echo "Files: *"
    echo "Copyright: The sluice developers"
    echo "License: MIT or Apache-2.0"
    echo
    echo "License: MIT"
    sed 's/^$/./; s/^/ /' LICENSE-MIT
    echo
    echo "License: Apache-2.0"
    echo " On Debian systems the full text is in /usr/share/common-licenses/Apache-2.0."
} >"$tree/usr/share/doc/sluice/copyright"
install -d "$tree/DEBIAN"
cp packaging/debian/postinst packaging/debian/prerm packaging/debian/postrm "$tree/DEBIAN/"
chmod 755 "$tree/DEBIAN/postinst" "$tree/DEBIAN/prerm" "$tree/DEBIAN/postrm"
echo /etc/sluice/sluice.conf >"$tree/DEBIAN/conffiles"
size=$(du -sk --exclude=DEBIAN "$tree" | cut -f1)
sed -e "s/@VERSION@/$deb_version/" -e "s/@ARCH@/$arch/" -e "s/@SIZE@/$size/" \
    packaging/debian/control >"$tree/DEBIAN/control"
dpkg-deb --root-owner-group -Zxz --build "$tree" "$out/sluice_${deb_version}_$arch.deb" >/dev/null

# 4. The JUnit 5 extension's jar (javac against Debian's junit5; java/README.md).
echo "package.sh: JUnit 5 extension (sluice-junit5-$version.jar)"
java/build.sh >/dev/null
cp "target/java/sluice-junit5-$version.jar" "$out/"

echo "package.sh: built in $out:"
(cd "$out" && ls -l ./*.whl ./*.tgz ./*.deb ./*.jar | awk '{print "  " $5 "\t" $9}')

if [ "$test" = yes ]; then
    SLUICE_PACKAGES=$out "$PYTHON" -m pytest -q -p no:cacheprovider tests/py/test_packages.py
    # The extension's tests, against the packaged binary.
    SLUICE_BIN=$out/stage/sluice java/build.sh --test
fi
rm -rf "$out/stage"

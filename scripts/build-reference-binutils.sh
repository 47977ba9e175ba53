#!/usr/bin/env bash
# Build the reference GNU tools pysframe is compared with: binutils 2.47 for x86-64 (objdump,
# readelf, as, ld, strip, objcopy and libsframe, reading every SFrame ABI) and cross as/ld for
# AArch64 and s390x, from Debian's source package.  About 6-20 minutes on 2 cores; done once
# per machine (a finished part is not built again).
#
#   scripts/build-reference-binutils.sh [PREFIX]     # default: ~/.cache/sframe-ref
#
# Afterwards PREFIX/env.sh exports OBJDUMP, READELF, GAS, LIBSFRAME, PATH_AARCH64, PATH_S390X.
# The test suite reads that file by itself (tests/conftest.py); tests that need a reference tool
# skip with a message while it is absent.
set -euo pipefail
prefix=${1:-$HOME/.cache/sframe-ref}
mkdir -p "$prefix"
prefix=$(cd "$prefix" && pwd)
sources=$prefix/src builds=$prefix/build apt_dir=$prefix/apt
mkdir -p "$sources" "$builds" "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"

export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q bison flex texinfo xz-utils >/dev/null

# A private apt configuration offering Debian's newer source packages (binutils 2.47).
mirror=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n 1)
if [ -z "$mirror" ]; then
  mirror=$(awk '/^deb /{print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
fi
mirror=${mirror:-http://deb.debian.org/debian}
: > "$apt_dir/sources.list"
for suite in trixie sid experimental; do
  echo "deb-src $mirror $suite main" >> "$apt_dir/sources.list"
done
apt_options=(-o "Dir::Etc::SourceList=$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
  -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache")

tree=$sources/binutils-2.47
if [ ! -d "$tree" ]; then
  apt-get "${apt_options[@]}" update -q >/dev/null
  version=$(apt-cache "${apt_options[@]}" showsrc binutils 2>/dev/null \
    | sed -n 's/^Version: \(2\.47-.*\)/\1/p' | sort -V | tail -n 1)
  if [ -z "$version" ]; then
    echo "no binutils 2.47 source package is offered by $mirror" >&2
    exit 1
  fi
  (cd "$sources" && apt-get "${apt_options[@]}" source -d "binutils=$version" >/dev/null \
    && tar xf binutils_2.47.orig.tar.xz)
fi

common=(--disable-gdb --disable-gdbserver --disable-sim --disable-gprofng --disable-werror
  --disable-nls)

# build NAME PREFIX "CONFIGURE ARGS" "MAKE TARGETS" "INSTALL TARGETS"
build() {
  local name=$1 install_dir=$2 configure_args=$3 make_targets=$4 install_targets=$5
  [ -f "$install_dir/.done" ] && return 0
  mkdir -p "$builds/$name"
  echo "$(date +%T) binutils 2.47 $name (log: $builds/$name.log)"
  # shellcheck disable=SC2086  # the argument lists are split on purpose
  if ! (cd "$builds/$name" \
      && "$tree/configure" --prefix="$install_dir" "${common[@]}" $configure_args \
      && make -j"$(nproc)" MAKEINFO=true $make_targets \
      && make MAKEINFO=true $install_targets) > "$builds/$name.log" 2>&1; then
    echo "binutils 2.47 $name failed: see $builds/$name.log" >&2
    exit 1
  fi
  touch "$install_dir/.done"
}

native=$prefix/binutils-2.47
build x86_64 "$native" \
  "--enable-shared --enable-targets=x86_64-linux-gnu,aarch64-linux-gnu,aarch64_be-linux-gnu,s390x-linux-gnu" \
  "all-gas all-ld all-binutils all-libsframe" "install-gas install-ld install-binutils install-libsframe"
cp -a "$builds/x86_64/libsframe/.libs/"libsframe.so* "$native/lib/" 2>/dev/null || true
build aarch64 "$prefix/binutils-2.47-aarch64" "--target=aarch64-linux-gnu" "all-gas all-ld" \
  "install-gas install-ld"
build s390x "$prefix/binutils-2.47-s390x" "--target=s390x-linux-gnu" "all-gas all-ld" \
  "install-gas install-ld"

cat > "$prefix/env.sh" <<ENV
export OBJDUMP=$native/bin/objdump READELF=$native/bin/readelf
export GAS=$native/bin/as LIBSFRAME=$native/lib/libsframe.so.3
export PATH_AARCH64=$prefix/binutils-2.47-aarch64/bin PATH_S390X=$prefix/binutils-2.47-s390x/bin
ENV
"$native/bin/objdump" --version | head -n 1
echo "reference tools ready: source $prefix/env.sh"

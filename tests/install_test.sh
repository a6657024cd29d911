#!/bin/sh
# install_test.sh BUILD_DIR SOURCE_DIR - cumemhist as an installed tool: `cmake --install` into a
# temporary prefix puts every file where it belongs and nothing of the tests; the installed
# command records a sample with its installed library and Python helper, and still does once
# the prefix is moved elsewhere; a program outside the tree builds against the C API with
# find_package(cumemhist) and with pkg-config; the manual page reads with man -l; the bash
# completion completes; and where dpkg exists, cpack makes a .deb that lists the same files.
TEST=install . "$(dirname "$0")/testlib.sh"
# under a sanitizer the installed library needs its runtime in every consumer: the plain build tests this
case "${LD_PRELOAD:-}" in *asan* | *ubsan* | *tsan*) echo "skipped: sanitizer build"; exit 77 ;; esac

cmake --install "$B" --prefix "$T/p" >"$T/install.log" 2>&1 || { bad "cmake --install: $(tail -3 "$T/install.log")"; finish; exit 1; }
(cd "$T/p" && find . -type f -o -type l | sed 's|^\./||' | sort) >files.txt
missing=
for f in bin/cumemhist lib/libcumemhist.so lib/libcumemhist.so.0 lib/libcumemhist.so.0.1.0 \
    include/cumemhist/recorder.h include/cumemhist/blocks.h share/cumemhist/python/cumemhist/__init__.py \
    share/cumemhist/python/cumemhist/_startup/sitecustomize.py share/man/man1/cumemhist.1 \
    share/bash-completion/completions/cumemhist lib/pkgconfig/cumemhist.pc lib/cmake/cumemhist/cumemhistConfig.cmake \
    lib/cmake/cumemhist/cumemhistConfigVersion.cmake lib/cmake/cumemhist/cumemhistTargets.cmake; do
    grep -qx "$f" files.txt || missing="$missing $f"
done
[ -e "$B/libcumemhist_cupti.so" ] && { grep -qx lib/libcumemhist_cupti.so files.txt || missing="$missing lib/libcumemhist_cupti.so"; }
[ -z "$missing" ] && ok "installed: $(wc -l <files.txt) files, each where it belongs" || bad "not installed:$missing"
stray=$(grep -E 'fake|libcuda|libcupti\.|test|bench|sample|snapshot\.h|analyzer\.h|__pycache__' files.txt | tr '\n' ' ')
[ -z "$stray" ] && ok "nothing of the tests, the fake driver or the private headers is installed" || bad "installed by mistake: $stray"
readelf -d "$T/p/lib/libcumemhist.so.0.1.0" | grep -q 'SONAME.*libcumemhist\.so\.0' && ok "libcumemhist has the SONAME libcumemhist.so.0" ||
    bad "no SONAME: $(readelf -d "$T/p/lib/libcumemhist.so.0.1.0" | grep -i soname)"

# the installed command, on its own library and helper, before and after the prefix moves
run_installed() { # PREFIX TAG
    P=$1
    v=$("$P/bin/cumemhist" --version)
    [ "$v" = "cumemhist 0.1.0" ] && ok "$2: --version says '$v'" || bad "$2: --version says '$v'"
    "$P/bin/cumemhist" record -q -o "$T/$2.cmh" -- "$B/samples/leaky" 3 >/dev/null 2>"$T/$2.err" || bad "$2: record failed: $(cat "$T/$2.err")"
    "$P/bin/cumemhist" peak --json "$T/$2.cmh" >"$T/$2.json" 2>&1 || bad "$2: peak failed: $(cat "$T/$2.json")"
    py - "$T/$2.json" "$2" <<'EOF' || fail=$((fail + 1))
import json, sys
d = json.load(open(sys.argv[1]))[0]
p = d["process"]
assert p["producer"] == "cumemhist 0.1.0", p
peak = d["peak_allocated"]["bytes"]
assert peak > 0, d
print(f"ok: {sys.argv[2]}: the installed recorder recorded leaky (peak {peak} B), the record says '{p['producer']}'")
EOF
    pp=$("$P/bin/cumemhist" record -q -o "$T/$2-py.cmh" -- sh -c 'echo "$PYTHONPATH"; echo "$LD_PRELOAD"' 2>/dev/null)
    case $pp in "$P/share/cumemhist/python/cumemhist/_startup:$P/share/cumemhist/python"*"$P/lib/libcumemhist.so"*)
        ok "$2: the program gets the installed helper on PYTHONPATH and the installed library preloaded" ;;
    *) bad "$2: PYTHONPATH / LD_PRELOAD were: $pp" ;;
    esac
    # `import cumemhist` outside record (plain python, a plain LD_PRELOAD run): --python-path
    # names the installed package, whose calls are no-ops without the recorder
    pyd=$("$P/bin/cumemhist" --python-path 2>&1)
    out=$(PYTHONPATH="$pyd" py -c 'import cumemhist; cumemhist.mark("step 1"); print(cumemhist.recording())' 2>&1)
    [ "$pyd" = "$P/share/cumemhist/python" ] && [ "$out" = False ] &&
        ok "$2: PYTHONPATH=\$(cumemhist --python-path) python: import cumemhist works without the recorder" || bad "$2: --python-path $pyd: $out"
}
run_installed "$T/p" installed
mv "$T/p" "$T/q"
run_installed "$T/q" moved

# a program outside the tree: CMake's find_package, then pkg-config
mkdir -p "$T/c" && cp "$SRC"/tests/consumer/* "$T/c/"
if cmake -S "$T/c" -B "$T/c/build" -DCMAKE_PREFIX_PATH="$T/q" >"$T/c.log" 2>&1 && cmake --build "$T/c/build" >>"$T/c.log" 2>&1; then
    out=$("$T/c/build/consumer" "$T/consumer.cmh" 2>&1) && [ -s "$T/consumer.cmh" ] && "$T/q/bin/cumemhist" summary "$T/consumer.cmh" >/dev/null &&
        ok "find_package(cumemhist): cumemhist::recorder links, runs and dumps a snapshot ($out)" || bad "consumer (cmake): $out"
    out=$(env LD_LIBRARY_PATH= "$T/c/build/blocks_only" 2>&1) && ! ldd "$T/c/build/blocks_only" | grep -q cumemhist &&
        ok "cumemhist::blocks is header-only: the allocator links nothing of ours and runs without it ($out)" || bad "blocks_only: $out"
else
    bad "the consumer did not build with find_package: $(tail -5 "$T/c.log")"
fi
if command -v pkg-config >/dev/null; then
    flags=$(PKG_CONFIG_PATH="$T/q/lib/pkgconfig" pkg-config --cflags --libs cumemhist)
    # shellcheck disable=SC2086
    if cc -o "$T/c/pc_consumer" "$T/c/consumer.c" $flags -Wl,-rpath,"$T/q/lib" 2>"$T/pc.log"; then
        out=$("$T/c/pc_consumer" "$T/pc.cmh" 2>&1) && [ -s "$T/pc.cmh" ] &&
            ok "pkg-config --cflags --libs cumemhist ($flags): builds and runs" || bad "consumer (pkg-config): $out"
    else
        bad "the consumer did not build with pkg-config ($flags): $(cat "$T/pc.log")"
    fi
    v=$(PKG_CONFIG_PATH="$T/q/lib/pkgconfig" pkg-config --modversion cumemhist)
    [ "$v" = 0.1.0 ] && ok "pkg-config says version $v" || bad "pkg-config --modversion: $v"
else
    bad "no pkg-config on this machine (scripts/deps.sh installs it)"
fi

# the manual and the completion
if command -v man >/dev/null; then
    page=$(MANWIDTH=100 man -l "$T/q/share/man/man1/cumemhist.1" 2>&1 | cat)
    n=0 all=0
    for c in $("$T/q/bin/cumemhist" --help | sed -n 's/^  \([a-z]*\) .*/\1/p'); do # every command --help lists
        all=$((all + 1))
        printf '%s\n' "$page" | grep -q "^   $c " && n=$((n + 1))
    done
    printf '%s\n' "$page" | grep -q "CUMEMHIST_MAX_ENTRIES" && [ $n -eq $all ] && [ $all -ge 19 ] &&
        ok "man -l reads the page: all $all commands, their options, the environment" || bad "man page: $n of $all commands: $(printf '%s\n' "$page" | head -5)"
else
    bad "no man on this machine (scripts/deps.sh installs man-db)"
fi
got=$(bash -c '. "$1"; COMP_WORDS=(cumemhist s); COMP_CWORD=1; _cumemhist; echo "${COMPREPLY[*]}";
    COMP_WORDS=(cumemhist export --format ""); COMP_CWORD=3; _cumemhist; echo "${COMPREPLY[*]}";
    COMP_WORDS=(cumemhist leaks --fa); COMP_CWORD=2; _cumemhist; echo "${COMPREPLY[*]}"' _ "$T/q/share/bash-completion/completions/cumemhist")
[ "$got" = "$(printf 'summary stats snapshot symbolize\nmemviz pickle json chrome pprof sqlite\n--fail-on-leak')" ] &&
    ok "bash completion: commands, a choice's values, a command's options" || bad "bash completion gave: $got"

# a Debian package, where dpkg is
if command -v dpkg-deb >/dev/null && command -v cpack >/dev/null; then
    (cd "$B" && cpack -G DEB -B "$T/deb" >"$T/cpack.log" 2>&1) || bad "cpack -G DEB: $(tail -5 "$T/cpack.log")"
    deb=$(ls "$T"/deb/cumemhist_*.deb 2>/dev/null | head -1)
    if [ -n "$deb" ]; then
        dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\./||' >deb.txt
        miss=
        for f in usr/bin/cumemhist usr/lib/libcumemhist.so.0.1.0 usr/include/cumemhist/blocks.h usr/share/man/man1/cumemhist.1 \
            usr/lib/pkgconfig/cumemhist.pc usr/lib/cmake/cumemhist/cumemhistConfig.cmake usr/share/bash-completion/completions/cumemhist; do
            grep -qx "$f" deb.txt || miss="$miss $f"
        done
        deps=$(dpkg-deb -f "$deb" Depends)
        [ -z "$miss" ] && ! grep -qE 'fake|test' deb.txt && ok "cpack -G DEB: $(basename "$deb"), $(grep -c . deb.txt) entries, Depends: $deps" ||
            bad "the .deb lacks:$miss"
        # every library the binaries load, and libunwind, which the recorder dlopens (msgpack-c's
        # packer is inline in its headers: nothing of ours loads libmsgpackc at run time)
        need= miss=
        for x in "$B/cumemhist" "$B/libcumemhist.so"; do
            for l in $(readelf -d "$x" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
                case $l in libc.so* | libm.so* | libgcc* | libpthread* | libdl* | ld-linux*) continue ;; esac
                need="$need $l"
                path=$(ldd "$x" | sed -n "s|^[[:space:]]*$l => \([^ ]*\).*|\1|p")
                pkg=$( (dpkg -S "$path" || dpkg -S "$(realpath "$path")" || dpkg -S "/usr$path") 2>/dev/null | head -1 | cut -d: -f1)
                [ -n "$pkg" ] && case $deps in *"$pkg"*) ;; *) miss="$miss $l ($pkg)" ;; esac
            done
        done
        case $deps in *libunwind8*) ;; *) miss="$miss libunwind8 (dlopen'ed)" ;; esac
        [ -z "$miss" ] && ok "the package depends on every library its binaries load:$need, and on libunwind8" ||
            bad "the package's Depends ($deps) lacks:$miss"
        # what apt would unpack, run from where it lies (the system is left alone)
        dpkg-deb -x "$deb" "$T/x" && "$T/x/usr/bin/cumemhist" record -q -o "$T/deb.cmh" -- "$B/samples/leaky" 2 >/dev/null 2>&1 &&
            "$T/x/usr/bin/cumemhist" leaks "$T/deb.cmh" >/dev/null && ok "the unpacked package records and reports" ||
            bad "the unpacked package does not record"
    else
        bad "cpack made no .deb: $(tail -5 "$T/cpack.log")"
    fi
else
    echo "note: no dpkg-deb or cpack here: the Debian package is not built"
fi
finish

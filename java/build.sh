#!/usr/bin/env bash
# Builds the JUnit 5 extension with javac against Debian's junit5 jars, and tests it with Jedis.
#
#   java/build.sh           target/java/sluice-junit5-VERSION.jar (Java 11 bytecode)
#   java/build.sh --test    the jar, then its tests (java/src/test) with JUnit's console
#                           launcher, against $SLUICE_BIN (default: target/debug/sluice)
#   java/build.sh --check   only lists what is missing for --test (exit 2 if anything is)
#
# Needs a JDK 11+ and Debian's junit5 (apt-get install default-jdk-headless junit5); the tests
# also need Jedis's dependencies as Debian packages them (libcommons-pool2-java,
# libslf4j-java, libgoogle-gson-java, libandroid-json-org-java). Jedis itself is not packaged
# and no Maven repository is reachable here: third_party/jedis holds the part of Jedis 5.2.0's
# source the tests use (MIT), compiled here once and kept in target/java. JAVA_JARS overrides
# /usr/share/java.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
JARS=${JAVA_JARS:-/usr/share/java}
out=$ROOT/target/java
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n1)

test=no check=no
case "${1:-}" in
    --test) test=yes ;;
    --check) test=yes check=yes ;;
    "") ;;
    *) echo "usage: $0 [--test | --check]" >&2; exit 2 ;;
esac

missing=()
for jar in junit-jupiter-api junit-platform-commons opentest4j apiguardian-api; do
    [ -f "$JARS/$jar.jar" ] || missing+=("$JARS/$jar.jar (apt-get install junit5)")
done
if [ "$test" = yes ]; then
    [ -f "$JARS/junit-platform-console-standalone.jar" ] || missing+=("$JARS/junit-platform-console-standalone.jar (apt-get install junit5)")
    for pair in commons-pool2:libcommons-pool2-java slf4j-api:libslf4j-java slf4j-nop:libslf4j-java \
        gson:libgoogle-gson-java json-android:libandroid-json-org-java; do
        [ -f "$JARS/${pair%%:*}.jar" ] || missing+=("$JARS/${pair%%:*}.jar (apt-get install ${pair#*:})")
    done
fi
command -v javac >/dev/null || missing+=("javac (apt-get install default-jdk-headless)")
if [ "${#missing[@]}" -gt 0 ]; then
    [ "$check" = yes ] || echo "java/build.sh: missing:" >&2
    printf '%s\n' "${missing[@]}" >&2
    exit 2
fi
[ "$check" = no ] || exit 0

api=$JARS/junit-jupiter-api.jar:$JARS/junit-platform-commons.jar:$JARS/opentest4j.jar:$JARS/apiguardian-api.jar
jar=$out/sluice-junit5-$version.jar
rm -rf "$out/classes" && mkdir -p "$out/classes"
javac --release 11 -Xlint:all -Werror -encoding UTF-8 -d "$out/classes" -cp "$api" \
    $(find java/src/main/java -name '*.java' | sort)
jar --create --file "$jar" -C "$out/classes" .
echo "java/build.sh: built $jar"
[ "$test" = yes ] || exit 0

# Jedis, compiled once per source archive.
deps=$JARS/commons-pool2.jar:$JARS/slf4j-api.jar:$JARS/gson.jar:$JARS/json-android.jar
archive=java/third_party/jedis/jedis-5.2.0-src.tar.xz
sum=$(sha256sum "$archive" | cut -c1-16)
jedis=$out/jedis-5.2.0-$sum.jar
if [ ! -f "$jedis" ]; then
    echo "java/build.sh: compiling Jedis 5.2.0 from $archive"
    rm -rf "$out/jedis-src" "$out/jedis-classes"
    mkdir -p "$out/jedis-src" "$out/jedis-classes"
    tar -C "$out/jedis-src" -xJf "$archive"
    javac --release 11 -nowarn -encoding UTF-8 -d "$out/jedis-classes" -cp "$deps" \
        $(find "$out/jedis-src" -name '*.java' | sort) 2>&1 | grep -v '^Note: ' || true
    [ -f "$out/jedis-classes/redis/clients/jedis/Jedis.class" ] || { echo "java/build.sh: Jedis did not compile" >&2; exit 1; }
    jar --create --file "$jedis.tmp" -C "$out/jedis-classes" . && mv "$jedis.tmp" "$jedis"
    rm -rf "$out/jedis-src" "$out/jedis-classes"
fi

rm -rf "$out/test-classes" && mkdir -p "$out/test-classes"
javac --release 11 -Xlint:all,-processing -Werror -encoding UTF-8 -d "$out/test-classes" -cp "$jar:$jedis:$api" \
    $(find java/src/test/java -name '*.java' | sort)

# The tests run in a scratch directory (one of them leaves a dump.rdb there on purpose).
export SLUICE_BIN=${SLUICE_BIN:-$ROOT/target/debug/sluice}
rm -rf "$out/run" && mkdir -p "$out/run"
cd "$out/run"
set +e
java -jar "$JARS/junit-platform-console-standalone.jar" --disable-banner --disable-ansi-colors --details=tree \
    --fail-if-no-tests --class-path "$out/test-classes:$jar:$jedis:$deps:$JARS/slf4j-nop.jar" \
    --scan-class-path "$out/test-classes" | tee "$out/run/console.txt"
status=${PIPESTATUS[0]}
set -e
# One closing line in the form the other suites end with.
count() { sed -n "s/^\[ *\([0-9]*\) tests $1 *\]$/\1/p" "$out/run/console.txt"; }
echo "java: $(count successful) passed, $(count failed) failed"
exit "$status"

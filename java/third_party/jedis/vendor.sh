#!/usr/bin/env bash
# Regenerates jedis-5.2.0-src.tar.xz from a Jedis checkout: the source files of tag v5.2.0
# that javac reads to compile java/src/test against Debian's jars (the rest of Jedis is not
# needed), unmodified, plus Jedis's LICENSE beside it.
#
#   java/third_party/jedis/vendor.sh PATH_TO_JEDIS_CHECKOUT
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
java=$(cd "$here/../.." && pwd)
jedis=$(cd "$1" && pwd)
JARS=${JAVA_JARS:-/usr/share/java}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git -C "$jedis" archive v5.2.0 src/main/java LICENSE | tar -C "$work" -x
cp "$work/LICENSE" "$here/LICENSE"
cp=$JARS/commons-pool2.jar:$JARS/slf4j-api.jar:$JARS/gson.jar:$JARS/json-android.jar
cp=$cp:$JARS/junit-jupiter-api.jar:$JARS/junit-platform-commons.jar:$JARS/opentest4j.jar:$JARS/apiguardian-api.jar
(cd "$work/src/main/java" && javac -nowarn -implicit:class -d "$work/classes" -cp "$cp" -sourcepath . -verbose \
    $(find "$java/src" -name '*.java') 2>&1) \
    | sed -n 's/^\[parsing started DirectoryFileObject\[\.:\(.*\)\]\]$/\1/p' | sort -u >"$work/files"
[ -s "$work/files" ] || { echo "vendor.sh: javac read no Jedis source" >&2; exit 1; }
tar -C "$work/src/main/java" --sort=name --owner=0 --group=0 --numeric-owner --mtime=2024-01-01 \
    -cJf "$here/jedis-5.2.0-src.tar.xz" -T "$work/files"
echo "vendor.sh: $(wc -l <"$work/files") files in $here/jedis-5.2.0-src.tar.xz"

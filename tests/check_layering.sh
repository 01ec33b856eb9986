#!/usr/bin/env bash
# The layering, checked from the sources (issue 52): every #include of a library or program
# source must name a file of its own target, or a public header (<folder>/include/longvk/)
# of a target it links, directly or through the targets those link. An include of a header
# of a target it does not link (a layer above, or beside), of another target's private
# header, or of a file outside every target (tests/) fails, naming file:line and both
# targets. tests/ itself is not checked: the tests are white-box (tests/CMakeLists.txt).
#
#   tests/check_layering.sh [-v] [ROOT]     -v: every include and what it resolved to
#
# The graph, as the CMakeLists.txt files build it (target_link_libraries among longvk's
# targets; the engine's shaders are add_dependencies plus a private include directory):
#
#   formats      engine/formats        (none): the bottom layer, no Vulkan
#   shaders      shaders               (none): push_<op>.h, shared by C and GLSL
#   engine       engine                formats shaders
#   codec        codec                 formats
#   parallel     pipelines/parallel    engine
#   sana         pipelines/sana        engine parallel
#   wan_vae      pipelines/wan_vae     engine parallel
#   sampling     pipelines/sampling    sana parallel
#   gemma2       pipelines/gemma2      engine
#   text         pipelines/text        gemma2
#   generate     pipelines/generate    sampling wan_vae text codec
#   longvk       pipelines/include     every library layer above (liblongvk.a; longvk.h)
#   cli_options  pipelines/cli_options longvk
#   bench        pipelines/bench       cli_options longvk
#   cli          pipelines/cli         cli_options bench longvk
#
# The table below is that graph; the script first compares it with the CMakeLists.txt
# files (a link added there and not here, or the reverse, fails), so neither goes stale.
set -euo pipefail
verbose=0
if [ "${1:-}" = "-v" ]; then verbose=1; shift; fi
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"

# name | folder | public include directory | direct dependencies | CMake targets
table='
formats|engine/formats|engine/formats/include||longvk_formats
shaders|shaders|shaders||longvk_shaders
engine|engine|engine/include|formats shaders|longvk_engine
codec|codec|codec/include|formats|longvk_codec
parallel|pipelines/parallel|pipelines/parallel/include|engine|longvk_parallel
sana|pipelines/sana|pipelines/sana/include|engine parallel|longvk_sana
wan_vae|pipelines/wan_vae|pipelines/wan_vae/include|engine parallel|longvk_wan_vae
sampling|pipelines/sampling|pipelines/sampling/include|sana parallel|longvk_sampling
gemma2|pipelines/gemma2|pipelines/gemma2/include|engine|longvk_gemma2
text|pipelines/text|pipelines/text/include|gemma2|longvk_text
generate|pipelines/generate|pipelines/generate/include|sampling wan_vae text codec|longvk_generate
longvk|pipelines/include|pipelines/include|formats engine codec parallel sana wan_vae sampling generate gemma2 text|longvk
cli_options|pipelines/cli_options|pipelines/cli_options|longvk|longvk_cli_options
bench|pipelines/bench|pipelines/bench|cli_options longvk|longvk_bench
cli|pipelines/cli|pipelines/cli|cli_options bench longvk|longvk_cli_commands longvk_cli
'

folders=$(echo "$table" | awk -F'|' 'NF { print $2 }')
# every file of the tree (what a quoted include can resolve to: git's list, else all but
# build folders), and the sources of the target folders, whose #include lines are checked
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    files=$(git ls-files --cached --others --exclude-standard | sort -u)
else
    files=$(find . -type f -not -path './.git/*' -not -path './build*' | sed 's|^\./||' | sort -u)
fi
sources=$(find $folders -type f | grep -E '\.(c|h|cc|S)$' | sort -u)
cmakelists=$(ls CMakeLists.txt engine/formats/CMakeLists.txt engine/CMakeLists.txt codec/CMakeLists.txt \
             shaders/CMakeLists.txt pipelines/CMakeLists.txt pipelines/*/CMakeLists.txt 2>/dev/null || true)

{
    echo "$table" | awk 'NF { print "T|" $0 }'
    echo "$files" | awk '{ print "F|" $0 }'
    # CMake statements, one a line (a call's lines joined up to its closing parenthesis)
    for f in $cmakelists; do
        sed 's/#.*//' "$f" | awk -v file="$f" '
            { line = line " " $0; depth += gsub(/\(/, "(", $0) - gsub(/\)/, ")", $0)
              if (depth <= 0) { if (line ~ /[a-z_]+ *\(/) print "C|" file "|" line; line = ""; depth = 0 } }'
    done
    # every include: path:line:text
    grep -n -E '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]' $sources | awk '{ print "I|" $0 }'
} | awk -F'|' -v verbose="$verbose" '
function dirname(p) { sub(/\/[^\/]*$/, "", p); return p }
function normal(p,    n, part, out, k, i) {   # a/b/../c -> a/c
    n = split(p, part, "/"); k = 0
    for (i = 1; i <= n; i++) {
        if (part[i] == "." || part[i] == "") continue
        if (part[i] == ".." && k > 0 && out[k] != "..") { k--; continue }
        out[++k] = part[i]
    }
    p = ""; for (i = 1; i <= k; i++) p = p (i > 1 ? "/" : "") out[i]
    return p
}
function owner(path,    best, len, t) {   # the target whose folder is the longest prefix of path
    best = ""; len = 0
    for (t in folder)
        if (index(path, folder[t] "/") == 1 && length(folder[t]) > len) { best = t; len = length(folder[t]) }
    return best
}
function closure(t, seen,    n, d, i) {  # every target t reaches, t included, into seen[]
    if (t in seen) return
    seen[t] = 1
    n = split(deps[t], d, " ")
    for (i = 1; i <= n; i++) closure(d[i], seen)
}
function fail(msg) { print msg; failures++ }
$1 == "T" {
    folder[$2] = $3; public[$2] = $4; deps[$2] = $5; order[++ntargets] = $2
    n = split($6, c, " ")
    for (i = 1; i <= n; i++) cmake_name[c[i]] = $2
    next
}
$1 == "F" { exists[$2] = 1; base = $2; sub(/.*\//, "", base); by_name[base] = by_name[base] " " $2; next }
$1 == "C" {
    stmt = $3; for (i = 4; i <= NF; i++) stmt = stmt "|" $i
    gsub(/[()]/, " ", stmt); n = split(stmt, w, /[ \t]+/)
    k = 1; while (k <= n && w[k] == "") k++
    cmd = tolower(w[k]); tgt = w[k + 1]
    if (cmd == "set") { v = ""; for (i = k + 2; i <= n; i++) if (w[i] != "") v = v " " w[i]; var[tgt] = v; next }
    if (cmd != "target_link_libraries" && cmd != "add_dependencies") next
    if (!(tgt in cmake_name)) next
    from = cmake_name[tgt]
    for (i = k + 2; i <= n; i++) {
        x = w[i]
        if (x ~ /^\$\{.*\}$/) { name = substr(x, 3, length(x) - 3); m = split(var[name], e, " ") }
        else { m = 1; e[1] = x }
        for (j = 1; j <= m; j++)
            if ((e[j] in cmake_name) && cmake_name[e[j]] != from) cmake_deps[from] = cmake_deps[from] " " cmake_name[e[j]]
    }
    next
}
$1 == "I" {
    # path:line:#include "x" (the path has no colon)
    text = $0; sub(/^I\|/, "", text)
    p = index(text, ":"); path = substr(text, 1, p - 1); rest = substr(text, p + 1)
    p = index(rest, ":"); line = substr(rest, 1, p - 1); inc = substr(rest, p + 1)
    quoted = inc ~ /include[[:space:]]*"/
    sub(/^[^<"]*[<"]/, "", inc); sub(/[>"].*$/, "", inc)
    me = owner(path); target = ""; file = ""
    if (inc ~ /^longvk\// || inc == "longvk.h") {
        for (t in public) if ((public[t] "/" inc) in exists) { target = t; file = public[t] "/" inc }
        if (target == "") { fail(path ":" line ": " me " includes " inc ", which no target has"); next }
    } else if (!quoted) {
        next                                    # a system header
    } else if (normal(dirname(path) "/" inc) in exists) {
        file = normal(dirname(path) "/" inc)
    } else {
        # found through an include directory: a file of that name (path) in some target
        bn = inc; sub(/.*\//, "", bn)
        n = split(by_name[bn], cand, " ")
        best = 0   # a file of the including target first, then of another target, then any
        for (i = 1; i <= n; i++)
            if (substr(cand[i], length(cand[i]) - length(inc)) == "/" inc || cand[i] == inc) {
                o = owner(cand[i]); score = o == me ? 3 : o != "" ? 2 : 1
                if (score > best) { best = score; file = cand[i] }
            }
        if (file == "") {
            if (verbose) print "  " path ":" line ": " inc " (not in the tree: generated, or a system header)"
            next
        }
    }
    target = owner(file)
    if (target == "") { fail(path ":" line ": " me " includes " inc " (" file "), a file of no target"); next }
    includes[me]++; reached[me, target] = 1
    if (verbose) print "  " me ": " path ":" line ": " inc " -> " file " (" target ")"
    if (target == me) next
    delete seen; closure(me, seen)
    if (!(target in seen))
        fail(path ":" line ": " me " includes " inc " (" file "), a header of " target ", which " me " does not link")
    else if (index(file, public[target] "/") != 1)
        fail(path ":" line ": " me " includes " inc " (" file "), private to " target)
    next
}
END {
    # the table against the CMakeLists.txt files
    for (i = 1; i <= ntargets; i++) {
        t = order[i]
        delete in_table; delete in_cmake
        n = split(deps[t], d, " "); for (j = 1; j <= n; j++) in_table[d[j]] = 1
        n = split(cmake_deps[t], d, " "); for (j = 1; j <= n; j++) in_cmake[d[j]] = 1
        for (x in in_table) if (!(x in in_cmake)) fail("check_layering.sh: the table says " t " links " x "; the CMakeLists.txt files do not")
        for (x in in_cmake) if (!(x in in_table)) fail("check_layering.sh: the CMakeLists.txt files link " t " to " x "; the table does not")
    }
    for (i = 1; i <= ntargets; i++) {
        t = order[i]; list = ""
        for (j = 1; j <= ntargets; j++) if ((t, order[j]) in reached) list = list (list == "" ? "" : " ") order[j]
        printf "%-12s %-24s %4d includes, of: %s\n", t, folder[t] "/", includes[t], list == "" ? "-" : list
    }
    if (failures) { printf "layering: %d violation(s)\n", failures; exit 1 }
    print "layering: every include is of the target itself or of a public header of a target it links"
}'

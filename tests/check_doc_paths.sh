#!/usr/bin/env bash
# Every repository path the documentation names must exist.
#
#   bash tests/check_doc_paths.sh [REPO_ROOT]
#
# Reads every *.md file and the comment lines of every CMakeLists.txt, prints FILE:LINE: PATH
# for each path that names nothing in the repository and exits 1 if there is any. CTest runs
# it (tests/CMakeLists.txt, label docs).
#
# The rules, kept few on purpose (a rule, not a list of exceptions, keeps text out):
#  1. Candidates. Markdown: the text of a `backtick span` without blanks, and a link target
#     [text](target) that is not a URL or an anchor; nothing inside ``` fences.
#     CMakeLists.txt: the words of its comment lines.
#  2. A candidate is a path if it ends in a known extension or in '/', or begins with ./, ../
#     or a top-level entry of the repository and '/'. Other text (f16/bf16, a=b) is not.
#     A bare extension (`.pth`) is a kind of file, not a file.
#  3. Placeholders are not paths: a word in capitals that names no repository file
#     (OUT.longvk-state, DIR/model.json), and <x.h> as a whole (a system header).
#  4. Wildcards: <name>, * and ? match anything (push_<op>.h, tests/<layer>/test_*.c), '...' too
#     (engine/...); {a,b} are alternatives, each must exist. A pattern must match a file.
#  5. Where a path is looked for: the repository root, then the document's folder. A path
#     that does not begin with a top-level entry may also be the tail of a repository path
#     (`sana/sana_dit.c`, an include name `longvk/sana.h`), if its first folder is one of
#     the repository's; one whose first folder is not (`src/gpu.cpp`, `diffusion/...`)
#     names a file of another project and is not checked. A bare file name is checked (as
#     the name of any repository file) when it is of the repository's C, GLSL, shell or
#     Markdown kinds; a bare .py or .json name is most often another project's file.
#  6. Absolute paths: system ones (/usr, /etc, /dev, /proc, /sys, /opt, /lib, /bin, /var) are
#     skipped; any other (/tmp/..., /work/...) is outside the repository: reported.
#  7. Made by the build, so accepted: FILE where FILE.in exists (longvk.pc), build/..., and a
#     name a CMakeLists.txt writes in the build tree (${SPIRV_DIR}/spirv_registry.c).
#  8. REV:PATH (a commit, then a path: a file since removed, `aed9bf7^:path`) must exist in
#     git at that commit.
set -euo pipefail

root="${1:-$(cd "$(dirname "$0")/.." && pwd)}"
cd "$root"
have_git=0
git rev-parse --is-inside-work-tree >/dev/null 2>&1 && have_git=1

list() {   # list PATTERN...: the repository's files matching a git pathspec
  if ((have_git)); then
    git ls-files --cached --others --exclude-standard -- "$@"
  else
    local args=() p
    for p in "$@"; do args+=(-o -path "./$p"); done
    find . \( -path ./.git -o -path './build*' \) -prune -o -type f \( -false "${args[@]}" \) -print |
      sed 's|^\./||'
  fi
}

# known: every file and folder ("a/b/" and "a/b"); tails: every tail of those ("b/c.c", "c.c")
declare -A known tails folders
while IFS= read -r f; do
  [[ -e "$f" ]] || continue                      # deleted, not yet staged
  p="$f"
  while :; do
    known["$p"]=1
    t="$p"
    while :; do tails["$t"]=1; [[ "$t" == */* ]] || break; t="${t#*/}"; done
    [[ "$p" == */* ]] || break
    p="${p%/*}"
    known["$p/"]=1; folders["${p##*/}"]=1
    t="$p/"
    while :; do tails["$t"]=1; [[ "$t" == */*/ ]] || break; t="${t#*/}"; done
  done
done < <(list '*')
toplevel=$(for k in "${!known[@]}"; do [[ "$k" == */* ]] || echo "$k"; done | sort -u | paste -sd'|')
capitals=" $(for k in "${!known[@]}"; do k="${k##*/}"; echo "${k%%.*}"; done |
             grep -E '^[A-Z][A-Z0-9_]*$' | sort -u | paste -sd' ') "
# rule 7: names the build writes, ${SOME_DIR}/name.ext in CMake code
# shellcheck disable=SC2016
generated=" $(list 'CMakeLists.txt' '*/CMakeLists.txt' | xargs grep -vh '^[[:space:]]*#' |
              grep -o '\${[A-Za-z_]*}/[A-Za-z0-9_.-]*\.[a-z]*' | sed 's|.*/||' | sort -u | paste -sd' ') "
ext='c|h|cc|comp|glsl|def|S|md|txt|cmake|in|pc|sh|py|json|safetensors|pth|npy|spv|mkv|mp4|webm|svg|csv|yml|yaml'
bare_ext='c|h|cc|comp|glsl|def|S|sh|md'

# FILE<TAB>LINE<TAB>CANDIDATE
extract() {
  local md cm
  while IFS= read -r md; do
    awk -v f="$md" '
      /^[ \t]*```/ { fence = !fence; next }
      fence { next }
      {
        s = $0
        while (match(s, /`[^`]+`/)) {
          c = substr(s, RSTART + 1, RLENGTH - 2)
          if (c !~ /[ \t]/) print f "\t" NR "\t" c
          s = substr(s, RSTART + RLENGTH)
        }
        s = $0
        while (match(s, /\]\([^) \t]+\)/)) {
          print f "\t" NR "\t" substr(s, RSTART + 2, RLENGTH - 3)
          s = substr(s, RSTART + RLENGTH)
        }
      }' "$md"
  done < <(list '*.md')
  while IFS= read -r cm; do
    awk -v f="$cm" '
      /^[ \t]*#/ {
        sub(/^[ \t]*#+/, "")
        n = split($0, w, /[ \t]+/)
        for (i = 1; i <= n; i++) {
          c = w[i]
          gsub(/^[("`'"'"']+|[)"`'"'"',;:.]+$/, "", c)
          if (c != "") print f "\t" NR "\t" c
        }
      }' "$cm"
  done < <(list 'CMakeLists.txt' '*/CMakeLists.txt')
}

normalise() {   # a/./b/../c -> a/c
  local - IFS=/ part out=() r
  set -f                                         # a * in the path is not expanded
  for part in $1; do
    case "$part" in
      ''|.) ;;
      ..) ((${#out[@]})) && unset 'out[${#out[@]}-1]' ;;
      *) out+=("$part") ;;
    esac
  done
  r="${out[*]}"
  [[ "$1" == */ && -n "$r" ]] && r="$r/"
  printf '%s' "$r"
}

matches() {   # matches PATTERN TABLE: does a wildcard pattern match a key of known / tails?
  local pat="$1" k
  local -n table="$2"
  for k in "${!table[@]}"; do
    # shellcheck disable=SC2053
    [[ "$k" == $pat ]] && return 0
  done
  return 1
}

found() {   # found DOC_DIR PATH: does PATH (no braces) name something in the repository?
  local dir="$1" p="$2" q wild=0 first
  [[ "$p" == *[*?]* ]] && wild=1
  for q in "$p" "$dir/$p"; do
    q=$(normalise "$q")
    [[ -n "${known[$q]:-}" ]] && return 0
    ((wild)) && matches "$q" known && return 0
    [[ -n "${known[$q.in]:-}" ]] && return 0     # rule 7
  done
  [[ "$p" =~ ^(\./|\.\./|($toplevel)/) ]] && return 1
  if [[ "$p" == */* ]]; then
    first="$p"
    while [[ "$first" == \** ]]; do first="${first#*/}"; done         # ...: the next folder
    first="${first%%/*}"
    [[ -z "${folders[$first]:-}" ]] && return 0                        # another project's
  else
    [[ "$p" =~ \.($bare_ext)$ ]] || return 0
  fi
  [[ -n "${tails[$p]:-}" ]] && return 0
  ((wild)) && matches "$p" tails && return 0
  return 1
}

alternatives() {   # a{b,c}d -> abd acd (braces may nest in sequence, not inside each other)
  local s="$1" pre body post alt
  if [[ "$s" =~ ^([^{]*)\{([^{}]*)\}(.*)$ ]]; then
    pre="${BASH_REMATCH[1]}" body="${BASH_REMATCH[2]}" post="${BASH_REMATCH[3]}"
    local - IFS=,
    set -f
    for alt in $body; do alternatives "$pre$alt$post"; done
  else
    printf '%s\n' "$s"
  fi
}

bad=0
while IFS=$'\t' read -r doc line c; do
  c="${c%%#*}"                                   # a link's anchor
  [[ -z "$c" || "$c" == *://* || "$c" == mailto:* ]] && continue
  c="${c%:[0-9]*}"                               # file.c:123
  [[ "$c" =~ ^[A-Za-z0-9_.~/\<\>*?{},+^:-]+$ ]] || continue
  [[ "$c" == -* || "$c" =~ ^\.[A-Za-z0-9]+$ ]] && continue          # an option; rule 2's .pth
  [[ "$c" =~ ^\<[^/]*\>$ ]] && continue                             # rule 3: <mpi.h>
  if [[ "$c" =~ ^([0-9a-f]{7,40}[~^0-9]*):(.+)$ ]]; then              # rule 8
    if ((have_git)) && ! git cat-file -e "$c" 2>/dev/null; then
      echo "$doc:$line: $c (not in git)"; bad=$((bad + 1))
    fi
    continue
  fi
  [[ "$c" == *:* ]] && continue
  if [[ "$c" == /* ]]; then                                        # rule 6
    [[ "$c" =~ ^/(usr|etc|dev|proc|sys|opt|lib|lib64|bin|var)(/|$) ]] && continue
    echo "$doc:$line: $c (outside the repository)"; bad=$((bad + 1)); continue
  fi
  [[ "$c" =~ \.($ext)$ || "$c" == */ || "$c" =~ ^(\./|\.\./|($toplevel)/) ]] || continue
  if [[ "$c" =~ (^|/)([A-Z][A-Z0-9_]*[A-Z0-9])(\.|/|$) && "$capitals" != *" ${BASH_REMATCH[2]} "* ]]; then
    continue                                                       # rule 3
  fi
  [[ "$c" =~ ^build(/|$) || "$generated" == *" ${c##*/} "* ]] && continue   # rule 7
  dir="${doc%/*}"; [[ "$doc" == */* ]] || dir=.
  pat=$(printf '%s' "$c" | sed 's/<[^>]*>/*/g; s/\.\.\.\([^/]\)/*\1/g; s/\.\.\.$/*/; s|/\.\.\./|/*/|g')
  ok=1
  while IFS= read -r alt; do
    found "$dir" "$alt" || { ok=0; break; }
  done < <(alternatives "$pat")
  if ((ok == 0)); then
    echo "$doc:$line: $c"; bad=$((bad + 1))
  fi
done < <(extract)

if ((bad)); then
  echo "check_doc_paths: $bad path(s) named in the documentation do not exist" >&2
  exit 1
fi
echo "check_doc_paths: every path the documentation names exists"

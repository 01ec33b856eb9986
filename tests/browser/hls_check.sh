#!/usr/bin/env bash
# A browser plays longvk's HLS stream while it is generated (issue 54): a manual check, not
# part of CTest (Chromium is a large package CI does not install).
#
#   apt-get install chromium      # Debian 12: Chromium 156
#   bash tests/browser/hls_check.sh [LONGVK] [SECONDS]
#
# It starts `longvk generate -o out.m3u8` (the default model, a prompt switch at half time),
# serves the folder over HTTP on 127.0.0.1 and opens hls_play.html in headless Chromium as
# soon as the playlist exists. The page plays the stream as hls.js does for fMP4 segments
# (Media Source Extensions): it polls the playlist while it grows, appends each new segment,
# ends at EXT-X-ENDLIST and plays to the end. Passes when every segment was appended, the
# page saw the playlist grow, and the browser decoded every frame.
set -euo pipefail
longvk="$(realpath "${1:-build/longvk}")"
seconds="${2:-40}"
here="$(cd "$(dirname "$0")" && pwd)"
command -v chromium >/dev/null || { echo "hls_check: chromium is not installed (apt-get install chromium)"; exit 77; }
work="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
cp "$here/hls_play.html" "$work/"
mkdir "$work/live"
port=$((20000 + RANDOM % 20000))
(cd "$work" && exec python3 -m http.server "$port" --bind 127.0.0.1 >/dev/null 2>&1) &
"$longvk" generate -p "two red balls bouncing on a blue background" \
  --prompt-at "$((seconds / 2))=three yellow squares on a dark background" --seconds "$seconds" \
  --burn-in-blocks 8 -s 7 -q -o "$work/live/out.m3u8" >"$work/generate.log" 2>&1 &
gen=$!
while [ ! -f "$work/live/out.m3u8" ]; do
  kill -0 "$gen" 2>/dev/null || { cat "$work/generate.log"; exit 1; }
  sleep 0.2
done
started=$(date +%s)
timeout $((seconds * 3 + 120)) chromium --headless=new --no-sandbox --disable-gpu \
  --autoplay-policy=no-user-gesture-required --enable-logging=stderr --v=0 \
  "http://127.0.0.1:$port/hls_play.html?u=/live/out.m3u8" >"$work/chromium.log" 2>&1 &
browser=$!
until grep -q 'HLSCHECK [0-9.]* DONE' "$work/chromium.log" 2>/dev/null; do
  kill -0 "$browser" 2>/dev/null || break
  sleep 0.5
done
kill "$browser" 2>/dev/null || true
grep -o 'HLSCHECK[^"]*' "$work/chromium.log" | sed 's/^HLSCHECK //' >"$work/page.log" || true
wait "$gen" || { echo "hls_check: generate failed:"; cat "$work/generate.log"; exit 1; }
echo "the page played to the end $(( $(date +%s) - started )) s after it opened"
cat "$work/page.log"
frames=$((seconds * 16))
segments=$((seconds / 2))
grep -q "ERROR" "$work/page.log" && { echo "hls_check: FAILED (the page's error above)"; exit 1; }
grep -q "segments $segments " "$work/page.log" || { echo "hls_check: FAILED: not $segments segments"; exit 1; }
grep -q " frames $frames " "$work/page.log" || { echo "hls_check: FAILED: not $frames frames decoded"; exit 1; }
polls=$(grep -o 'playlist-polls [0-9]*' "$work/page.log" | awk '{print $2}')
[ "${polls:-0}" -gt 1 ] || { echo "hls_check: FAILED: the page never saw the playlist grow"; exit 1; }
echo "hls_check: passed ($segments segments, $frames frames, the playlist read $polls times while it grew)"

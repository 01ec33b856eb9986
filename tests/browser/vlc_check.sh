#!/usr/bin/env bash
# VLC plays longvk's HLS stream while it is generated (issue 54): a manual check, not part of
# CTest (CI installs no player).
#
#   apt-get install --no-install-recommends vlc-bin vlc-plugin-base   # Debian 12: VLC 3.0
#   bash tests/browser/vlc_check.sh [LONGVK] [SECONDS]
#
# It starts `longvk generate -o out.m3u8` (the default model, a prompt switch at half time) and,
# as soon as the playlist exists, VLC (cvlc, no window) on it, its frames transcoded to a file
# (VLC has no frame counter of its own; its AVI muxer reports the frames it wrote). VLC reads the
# playlist as an EVENT stream while it grows and stops at EXT-X-ENDLIST. Passes when VLC started
# before the stream was complete and wrote as many frames from it as from the same playlist once
# complete, all of them but the last (VLC's transcode leaves out the last frame, of an .mp4 too).
# VLC refuses to run as root: as root it runs as `nobody`.
set -euo pipefail
longvk="$(realpath "${1:-build/longvk}")"
seconds="${2:-30}"
command -v cvlc >/dev/null || {
  echo "vlc_check: cvlc is not installed (apt-get install --no-install-recommends vlc-bin vlc-plugin-base)"
  exit 77
}
work="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
chmod 777 "$work"
as_user=()
[ "$(id -u)" -ne 0 ] || as_user=(runuser -u nobody --)
# cvlc INPUT OUTPUT.avi: the frames VLC decodes from INPUT, written to OUTPUT; prints how many
vlc_frames() {
  "${as_user[@]}" env HOME="$work" cvlc -I dummy --no-audio "$1" \
    --sout "#transcode{vcodec=RV24,acodec=none}:std{access=file,mux=avi,dst=$2}" vlc://quit \
    >"$2.log" 2>&1 || true
  grep -o 'avi mux: stream\[0\].*frames:[0-9]*' "$2.log" | grep -o '[0-9]*$' | tail -1
}
"$longvk" generate -p "two red balls bouncing on a blue background" \
  --prompt-at "$((seconds / 2))=three yellow squares on a dark background" --seconds "$seconds" \
  --burn-in-blocks 8 -s 7 -q -o "$work/out.m3u8" >"$work/generate.log" 2>&1 &
gen=$!
while [ ! -f "$work/out.m3u8" ]; do
  kill -0 "$gen" 2>/dev/null || { cat "$work/generate.log"; exit 1; }
  sleep 0.2
done
at_start=$(grep -c '\.m4s$' "$work/out.m3u8" || true)
grep -q EXT-X-ENDLIST "$work/out.m3u8" && { echo "vlc_check: the stream was complete before VLC started"; exit 1; }
live=$(timeout $((seconds * 3 + 120)) bash -c "$(declare -p as_user work); $(declare -f vlc_frames); vlc_frames '$work/out.m3u8' '$work/live.avi'")
wait "$gen" || { cat "$work/generate.log"; exit 1; }
segments=$(grep -c '\.m4s$' "$work/out.m3u8")
whole=$(vlc_frames "$work/out.m3u8" "$work/whole.avi")
expected=$(ffprobe -v error -count_frames -select_streams v:0 -show_entries stream=nb_read_frames -of csv=p=0 \
  "$work/out.m3u8" | grep -m1 '[0-9]')
echo "vlc_check: VLC started with $at_start of $segments segments in the playlist; it wrote ${live:-no} frames" \
  "from the growing stream, ${whole:-no} from the finished one (ffprobe: $expected frames)"
if [ -z "$live" ] || [ "$live" != "$whole" ] || [ "$live" -lt $((expected - 1)) ]; then
  echo "vlc_check: FAILED"
  exit 1
fi
echo "vlc_check: passed"

#!/usr/bin/env bash
# Install the Debian packages gpu-drills needs, only when they are missing.
# Root installs them; anyone else gets one line saying what to install.
set -euo pipefail

# command-to-check:package pairs
needs=(
  "fio:fio"
  "chromium:chromium"
  "/usr/share/fonts/truetype/wqy/wqy-microhei.ttc:fonts-wqy-microhei"
  "libfuse.so.2:libfuse2"  # the twin's checkpoint store (fusepy loads it; FUSE needs /dev/fuse and root)
  "prometheus:prometheus"  # detection: Prometheus + promtool (the rule pack's tests; a managed stack)
  "prometheus-alertmanager:prometheus-alertmanager"
)

missing=()
for pair in "${needs[@]}"; do
  cmd="${pair%%:*}"; pkg="${pair#*:}"
  if [[ "$cmd" == *.so.* ]]; then
    ldconfig -p 2>/dev/null | grep -q "$cmd" || missing+=("$pkg")
  elif [[ "$cmd" == /* ]]; then
    [[ -e "$cmd" ]] || missing+=("$pkg")
  else
    command -v "$cmd" >/dev/null 2>&1 || missing+=("$pkg")
  fi
done

((${#missing[@]} == 0)) && exit 0

if [[ $(id -u) -ne 0 ]]; then
  echo "gpu-drills: missing system packages: ${missing[*]} — run: sudo apt-get install -y ${missing[*]}" >&2
  exit 0
fi

echo "gpu-drills: installing system packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null

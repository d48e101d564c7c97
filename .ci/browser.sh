#!/usr/bin/env bash
# Install Chromium and its chromedriver from Debian's packages when either is missing (the
# dashboard's browser tests drive them headless; selenium is pointed at /usr/bin/chromium and
# /usr/bin/chromedriver explicitly, so it never downloads a browser or a driver).
# Idempotent; needs root (or sudo) for the install.
set -euo pipefail

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
  echo "installing Chromium and chromedriver from Debian's packages" >&2
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
fi
chromium --version >&2
chromedriver --version >&2

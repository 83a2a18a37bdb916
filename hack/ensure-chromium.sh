#!/usr/bin/env bash
# Makes sure Chromium is installed, from Debian's chromium package when missing. test/webreview
# drives kubectl plan's review pages in it, headless (chromedp).
set -euo pipefail
if path=$(command -v chromium 2>/dev/null); then
  echo "chromium: $path" >&2
  exit 0
fi
echo "chromium: installing Debian's chromium package" >&2
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null
path=$(command -v chromium) || { echo "chromium: install finished but no chromium on PATH" >&2; exit 1; }
echo "chromium: $path" >&2

#!/usr/bin/env bash
# Print the path of a Python >= 3.12 interpreter: PATH first, then pyenv. Exit 1 with advice if none.
set -u
ok() { "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' >/dev/null 2>&1; }
for cand in python3.12 python3.13 python3 python; do
  p=$(command -v "$cand" 2>/dev/null) || continue
  if ok "$p"; then "$p" -c 'import sys; print(sys.executable)'; exit 0; fi
done
if command -v pyenv >/dev/null 2>&1; then
  root=$(pyenv root)
  for v in $(pyenv versions --bare 2>/dev/null | grep -E '^3\.(1[2-9]|[2-9][0-9])(\.[0-9]+)?$' | sort -V); do
    p="$root/versions/$v/bin/python"
    if [ -x "$p" ] && ok "$p"; then echo "$p"; exit 0; fi
  done
fi
echo "pymc_dp needs Python >= 3.12, and none was found on PATH or in pyenv." >&2
echo "Install one (e.g. 'pyenv install 3.12' or your system's python3.12 package) and run make again." >&2
exit 1

# Sourced (from the checkout's root) by .ci/test.sh and examples/run-demo.sh: outside a
# virtual environment, create .venv in the checkout once and put it first on PATH, so that
# `python3 -m pip install` works on a distribution's own Python too (PEP 668: Debian 12 and
# Ubuntu 24.04 refuse it with "externally-managed-environment"). Inside a venv (VIRTUAL_ENV
# set, or python3 is one) nothing changes.
#
# The venv sees the base interpreter's packages (--system-site-packages): where they are
# already installed and recent enough (a CI image, a pyenv Python) pip installs only this
# checkout into it; what is missing or too old goes into .venv. Reused while its Python
# runs; pip itself then checks that the install is up to date.
if [ -z "${VIRTUAL_ENV:-}" ] \
    && python3 -c 'import sys; sys.exit(sys.prefix != sys.base_prefix)'; then
  if ! .venv/bin/python3 -c 'import pip' 2>/dev/null; then
    if ! python3 -c 'import ensurepip, venv' 2>/dev/null; then  # Debian: python3-venv
      apt-get update -qq && apt-get install -y -qq python3-venv
    fi
    rm -rf .venv
    python3 -m venv --system-site-packages .venv
  fi
  export VIRTUAL_ENV="$PWD/.venv"
  export PATH="$VIRTUAL_ENV/bin:$PATH"
  hash -r
  echo "using $VIRTUAL_ENV ($(python3 --version))"
fi

# Shared by scripts/demo, scripts/test and scripts/lint: install what is missing, configure, build.
# Sourced, not run.

set -euo pipefail

JOBMAN_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# Debian packages the build, the tests and the tools need.
JOBMAN_PACKAGES=(
  g++ cmake ninja-build pkg-config lld
  libcurl4-openssl-dev nlohmann-json3-dev libcli11-dev libsqlite3-dev libspdlog-dev
  libyaml-cpp-dev libcpp-httplib-dev libssl-dev libgtest-dev libgmock-dev libpq-dev libfuse3-dev fuse3
  clang-format clang-tidy ccache
  zsh fish curl python3
  python3-googleapi python3-google-auth python3-google-auth-httplib2 python3-httplib2 nodejs
  python3-aiosmtpd chromium postgresql openssh-server openssh-client
)

# What building jobman and running it on the bundled mock need (scripts/demo): the compiler, the build tools and the
# libraries, curl for the demo's admin calls, and OpenSSH (the mock's worker hosts run its server, jobman connects
# with its client); not the test tools, browsers and servers above.
JOBMAN_BUILD_PACKAGES=(
  g++ cmake ninja-build pkg-config
  libcurl4-openssl-dev nlohmann-json3-dev libcli11-dev libsqlite3-dev libspdlog-dev
  libyaml-cpp-dev libcpp-httplib-dev libssl-dev libpq-dev libfuse3-dev fuse3 curl openssh-server openssh-client
)

# Progress for people, with the time of day, so that a CI log shows where its minutes went.
say() { printf '\033[1m==> [%s] %s\033[0m\n' "$(date +%T)" "$*" >&2; }

# stage NAME: ends the stage under way and begins NAME; stage_end ends it. When JOBMAN_STAGES names a file (.ci/run
# sets it), "begin" and "end" lines go to it with the stage's name and the time (seconds since the epoch), tabs
# between them: a stage with a begin and no end is the one that failed.
JOBMAN_STAGE_NAME=""
stage() {
  stage_end
  JOBMAN_STAGE_NAME="$1"
  if [ -n "${JOBMAN_STAGES:-}" ]; then
    printf 'begin\t%s\t%s\n' "$JOBMAN_STAGE_NAME" "$(date +%s)" >>"$JOBMAN_STAGES"
  fi
}
stage_end() {
  if [ -n "$JOBMAN_STAGE_NAME" ] && [ -n "${JOBMAN_STAGES:-}" ]; then
    printf 'end\t%s\t%s\n' "$JOBMAN_STAGE_NAME" "$(date +%s)" >>"$JOBMAN_STAGES"
  fi
  JOBMAN_STAGE_NAME=""
}

# ccache_args: prints the CMake arguments that build with ccache, when it is installed (nothing otherwise), and
# exports its settings. One cache under ~/.cache/ccache serves every build directory and every clone: paths under the
# checkout are hashed relative to it (base_dir) and the build's working directory is left out of the hash
# (hash_dir), so a fresh clone of a commit built before compiles almost nothing. Unity batches #include their
# sources by absolute path, so they hit through ccache's preprocessed mode. `ccache -s` shows the hit rate (with
# CCACHE_DIR as below); .ci/run prints its own run's.
export CCACHE_DIR="${CCACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ccache}"
export CCACHE_BASEDIR="$JOBMAN_ROOT"
export CCACHE_NOHASHDIR=true
export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-12G}"
ccache_args() {
  if command -v ccache >/dev/null 2>&1; then
    echo "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache"
  fi
}

# Installs the packages that are not installed yet; nothing when all are present.
ensure_packages() {
  local missing=() p
  for p in "$@"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
      missing+=("$p")
    fi
  done
  if [ ${#missing[@]} -eq 0 ]; then
    return 0
  fi
  say "installing Debian packages: ${missing[*]}"
  local sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    sudo=(sudo)
  fi
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# npm, for the Node.js client tests: Debian's package when no npm came with nodejs (a nodejs from elsewhere brings
# its own, and conflicts with Debian's npm).
ensure_npm() {
  if ! command -v npm >/dev/null 2>&1; then
    ensure_packages npm
  fi
}

# configure_and_build DIR [cmake args...]: configures (once) and builds with all cores. JOBMAN_BUILD_TARGETS, when
# set, names the targets to build instead of all.
configure_and_build() {
  local dir="$1"
  shift
  local generator=() launcher
  if command -v ninja >/dev/null 2>&1; then
    generator=(-G Ninja)
  fi
  read -r -a launcher <<<"$(ccache_args)"
  if [ ! -f "$dir/CMakeCache.txt" ]; then
    say "configuring $dir"
    cmake -S "$JOBMAN_ROOT" -B "$dir" "${generator[@]}" "${launcher[@]}" "$@" >/dev/null
  else
    cmake -S "$JOBMAN_ROOT" -B "$dir" "${launcher[@]}" "$@" >/dev/null
  fi
  say "building $dir"
  local targets=()
  if [ -n "${JOBMAN_BUILD_TARGETS:-}" ]; then
    read -r -a targets <<< "$JOBMAN_BUILD_TARGETS"
    targets=(--target "${targets[@]}")
  fi
  cmake --build "$dir" --parallel "$(nproc)" "${targets[@]}"
}

#!/bin/sh
# awrepl installer: downloads the awrepl executable for this machine from a release, checks its
# SHA-256 against the release's SHA256SUMS, and installs it (default: ~/.local/bin/awrepl).
#
#   curl -fsSL https://github.com/awrepl/awrepl/releases/latest/download/install.sh | sh
#   curl -fsSL .../install.sh | sh -s -- --version 0.1.0 --dir /usr/local/bin
#   wget -qO- .../install.sh | sh
#
# Options (each also an environment variable; an option beats its variable):
#   --version V    AWREPL_INSTALL_VERSION   a release version (0.1.0 or v0.1.0); default: the release this
#                                           copy came from (latest for the repository's copy)
#   --dir DIR      AWREPL_INSTALL_DIR       where to put the executable; default: ~/.local/bin
#   --base-url U   AWREPL_INSTALL_BASE_URL  the directory that holds the release files (a mirror, a
#                                           local server); default: the GitHub release of --version
#   --platform P   AWREPL_INSTALL_PLATFORM  linux-x64, linux-arm64, darwin-x64 or darwin-arm64
#                                           instead of this machine's (the result is not run)
#
# Every download is bounded, so a server that accepts and never answers (or stops midway) cannot hang
# the install; raise the bounds for a slow or flaky link (whole seconds, environment only):
#   AWREPL_INSTALL_CONNECT_TIMEOUT  to connect (default 30)
#   AWREPL_INSTALL_STALL_TIMEOUT    without receiving a byte, before the answer or during it (default
#                                   60); a slow download that keeps moving is never cut off
#
# Needs: sh, curl or wget, sha256sum or shasum, and uname/mkdir/mktemp/awk/cp/chmod/mv/rm (tested
# with exactly these on PATH: tests/packaging/install.test.ts).
# gzip is used when present (the download is then about half the size). Nothing outside the
# install directory is changed; a checksum mismatch or a binary that does not run installs nothing.
# Under GitHub Actions ($GITHUB_PATH set) the directory is added to the PATH of later steps.

# Everything is inside main(), called on the last line: a download cut short runs nothing.
set -eu

# The GitHub repository whose releases hold awrepl: a placeholder until the first release (README,
# "Releasing": it is package.json's "repository"; tests/packaging/install.test.ts checks they agree).
REPO="awrepl/awrepl"
DEFAULT_VERSION=latest # the copy attached to a release says that release's version (scripts/build.ts)
PLATFORMS="linux-x64 linux-arm64 darwin-x64 darwin-arm64"

say() { printf '%s\n' "awrepl-install: $*" >&2; }
die() {
	say "error: $*"
	exit 1
}
have() { command -v "$1" >/dev/null 2>&1; }

usage() {
	cat <<'EOF'
Install awrepl (a persistent Python REPL) from a release.

Usage: install.sh [--version V] [--dir DIR] [--base-url URL] [--platform P]

  --version V    release version, e.g. 0.1.0 (env AWREPL_INSTALL_VERSION; default: latest)
  --dir DIR      install directory (env AWREPL_INSTALL_DIR; default: ~/.local/bin)
  --base-url U   where the release files are (env AWREPL_INSTALL_BASE_URL)
  --platform P   linux-x64 | linux-arm64 | darwin-x64 | darwin-arm64 (env AWREPL_INSTALL_PLATFORM)

Timeouts, in whole seconds (environment only): AWREPL_INSTALL_CONNECT_TIMEOUT to connect (default 30),
AWREPL_INSTALL_STALL_TIMEOUT without receiving data (default 60).
EOF
}

# The platform name of this machine, or an error naming what was found.
detect_platform() {
	os=$(uname -s 2>/dev/null || echo unknown)
	arch=$(uname -m 2>/dev/null || echo unknown)
	case "$os" in
	Linux) os_name=linux ;;
	Darwin) os_name=darwin ;;
	MINGW* | MSYS* | CYGWIN* | Windows_NT)
		die "this is Windows ($os); use install.ps1 instead:  powershell -c \"irm https://github.com/$REPO/releases/latest/download/install.ps1 | iex\""
		;;
	*) die "no awrepl build for this operating system: $os $arch (builds exist for: $PLATFORMS)" ;;
	esac
	case "$arch" in
	x86_64 | amd64) arch_name=x64 ;;
	aarch64 | arm64) arch_name=arm64 ;;
	*) die "no awrepl build for this processor: $os $arch (builds exist for: $PLATFORMS)" ;;
	esac
	# An x64 shell on Apple silicon runs under Rosetta 2: the native build is the better one.
	if [ "$os_name" = darwin ] && [ "$arch_name" = x64 ] && [ "$(sysctl -n sysctl.proc_translated 2>/dev/null || echo 0)" = 1 ]; then
		arch_name=arm64
	fi
	echo "$os_name-$arch_name"
}

# True when this Linux uses musl (Alpine): the release's Linux builds need glibc.
is_musl() {
	[ "$(uname -s 2>/dev/null)" = Linux ] || return 1
	for f in /lib/ld-musl-*.so.1; do [ -e "$f" ] && return 0; done
	return 1
}

# Dies unless VALUE, the value of the variable NAME, is a whole number of seconds above 0.
check_seconds() { # NAME VALUE
	case "$2" in
	'' | *[!0-9]*) ;;
	*[1-9]*) return 0 ;;
	esac
	die "$1 must be a whole number of seconds above 0, not '$2'"
}

# Downloads URL to FILE; its status is the downloader's. Neither curl nor wget bounds a connection
# that is open but silent by default (and wget retries a silent read 20 times), so both get the
# connect bound and a stall bound: $stall_timeout seconds without a byte end the transfer, while a
# slow one that keeps moving goes on however long it takes.
download() { # URL FILE [progress]
	case "$1" in https://*) proto="--proto =https --tlsv1.2" ;; *) proto="" ;; esac
	if have curl; then
		# --speed-limit 1 --speed-time N: less than a byte a second over the last N seconds.
		bounds="--connect-timeout $connect_timeout --speed-limit 1 --speed-time $stall_timeout"
		# shellcheck disable=SC2086 # $proto is empty or two words, $bounds six words, on purpose
		if [ -t 2 ] && [ "${3:-}" = progress ]; then
			curl $proto $bounds --fail --location --progress-bar --output "$2" "$1"
		else
			curl $proto $bounds --fail --location --silent --show-error --output "$2" "$1"
		fi
	elif have wget; then
		# GNU wget's (and wget2's) --read-timeout is the time without data. BusyBox wget (Alpine) has
		# none of these options: its -T bounds the connect and each read, and it never retries.
		case "$(wget --version 2>/dev/null)" in
		*"GNU Wget"*)
			wget -q --dns-timeout="$connect_timeout" --connect-timeout="$connect_timeout" --read-timeout="$stall_timeout" --tries=1 -O "$2" "$1"
			;;
		*) wget -q -T "$stall_timeout" -O "$2" "$1" ;;
		esac
	else
		die "need curl or wget to download"
	fi
}

# Dies for a download of URL that failed with the downloader's STATUS; HINT says what it may mean.
cannot_download() { # URL STATUS HINT
	limits="AWREPL_INSTALL_CONNECT_TIMEOUT=$connect_timeout, AWREPL_INSTALL_STALL_TIMEOUT=$stall_timeout: seconds to connect, seconds without data; raise them for a slow link; nothing was installed"
	# curl's 28 is a timeout (curl has said which); wget's 4 is any network failure, a timeout among them.
	if have curl; then
		[ "$2" != 28 ] || die "cannot download $1: timed out ($limits)"
	elif [ "$2" = 4 ]; then
		die "cannot download $1: a network failure or a timeout ($limits)"
	fi
	die "cannot download $1 ($3)"
}

sha256_of() {
	if have sha256sum; then
		sha256sum "$1" | awk '{ print $1 }'
	elif have shasum; then
		shasum -a 256 "$1" | awk '{ print $1 }'
	else
		die "need sha256sum or shasum to check the download (nothing was installed)"
	fi
}

# The SHA-256 that SHA256SUMS lists for FILE (`HASH  FILE` or `HASH *FILE`), or nothing.
listed_sum() { # SUMS FILE
	awk -v f="$2" '$2 == f || $2 == "*" f { print tolower($1); exit }' "$1"
}

# The temporary directory, and a staged copy in the install directory that was not moved in yet.
cleanup() {
	rm -rf "$tmp"
	if [ -n "$staged" ]; then rm -f "$staged"; fi
}

# mv would move the executable into a directory (or a link to one) at the target, and the install
# would look done: refused before the download, and again just before the move.
refuse_directory() {
	if [ -d "$target" ]; then
		die "$target is a directory (or a link to one): move it away or choose another --dir (nothing was installed)"
	fi
}

on_path() {
	case ":${PATH:-}:" in *":$1:"*) return 0 ;; *) return 1 ;; esac
}

main() {
	version=${AWREPL_INSTALL_VERSION:-$DEFAULT_VERSION}
	dir=${AWREPL_INSTALL_DIR:-}
	base=${AWREPL_INSTALL_BASE_URL:-}
	platform=${AWREPL_INSTALL_PLATFORM:-}
	while [ $# -gt 0 ]; do
		case "$1" in
		--version) [ $# -ge 2 ] || die "--version needs a value"; version=$2; shift 2 ;;
		--version=*) version=${1#*=}; shift ;;
		--dir) [ $# -ge 2 ] || die "--dir needs a value"; dir=$2; shift 2 ;;
		--dir=*) dir=${1#*=}; shift ;;
		--base-url) [ $# -ge 2 ] || die "--base-url needs a value"; base=$2; shift 2 ;;
		--base-url=*) base=${1#*=}; shift ;;
		--platform) [ $# -ge 2 ] || die "--platform needs a value"; platform=$2; shift 2 ;;
		--platform=*) platform=${1#*=}; shift ;;
		-h | --help) usage; exit 0 ;;
		*) usage >&2; die "unknown argument: $1" ;;
		esac
	done

	connect_timeout=${AWREPL_INSTALL_CONNECT_TIMEOUT:-30}
	stall_timeout=${AWREPL_INSTALL_STALL_TIMEOUT:-60}
	check_seconds AWREPL_INSTALL_CONNECT_TIMEOUT "$connect_timeout"
	check_seconds AWREPL_INSTALL_STALL_TIMEOUT "$stall_timeout"

	if [ -z "$dir" ]; then
		[ -n "${HOME:-}" ] || die "HOME is not set: give the directory with --dir or AWREPL_INSTALL_DIR"
		dir="$HOME/.local/bin"
	fi
	case "$dir" in /*) ;; *) dir="$(pwd)/$dir" ;; esac
	target="$dir/awrepl"
	refuse_directory

	native=yes
	if [ -n "$platform" ]; then
		native=no
		case " $PLATFORMS " in *" $platform "*) ;; *) die "unknown platform '$platform' (builds exist for: $PLATFORMS)" ;; esac
	else
		platform=$(detect_platform)
	fi

	if [ -z "$base" ]; then
		case "$version" in
		latest) base="https://github.com/$REPO/releases/latest/download" ;;
		v*) base="https://github.com/$REPO/releases/download/$version" ;;
		*) base="https://github.com/$REPO/releases/download/v$version" ;;
		esac
	fi
	base=${base%/}

	tmp=$(mktemp -d 2>/dev/null || mktemp -d -t awrepl-install) || die "cannot create a temporary directory"
	staged=""
	trap cleanup EXIT
	trap 'cleanup; exit 130' INT TERM

	download "$base/SHA256SUMS" "$tmp/SHA256SUMS" || cannot_download "$base/SHA256SUMS" $? "is the version right? nothing was installed"

	asset="awrepl-$platform"
	if [ "$native" = yes ] && is_musl; then
		[ -n "$(listed_sum "$tmp/SHA256SUMS" "awrepl-$platform-musl")" ] ||
			die "this Linux uses musl libc (Alpine?) and this release has no musl build (awrepl-$platform-musl); the $platform build needs glibc"
		asset="awrepl-$platform-musl"
	fi
	# Older x64 CPUs without AVX2 need Bun's baseline build, when the release has one.
	if [ "$native" = yes ] && [ "$platform" = linux-x64 ] && [ -r /proc/cpuinfo ] && ! awk '/^flags/ && /[ \t]avx2([ \t]|$)/ { found = 1; exit } END { exit !found }' /proc/cpuinfo; then
		if [ -n "$(listed_sum "$tmp/SHA256SUMS" "$asset-baseline")" ]; then
			asset="$asset-baseline"
		else
			say "warning: this CPU lacks AVX2 and the release has no baseline build; awrepl may not run"
		fi
	fi

	expected=$(listed_sum "$tmp/SHA256SUMS" "$asset")
	[ -n "$expected" ] || die "the release at $base has no $asset (SHA256SUMS does not list it; nothing was installed)"

	# The gzip copy when the release has one and gzip is here: about half the bytes.
	fetched="$asset"
	if have gzip && [ -n "$(listed_sum "$tmp/SHA256SUMS" "$asset.gz")" ]; then
		fetched="$asset.gz"
		expected=$(listed_sum "$tmp/SHA256SUMS" "$fetched")
	fi
	say "downloading $base/$fetched"
	download "$base/$fetched" "$tmp/$fetched" progress || cannot_download "$base/$fetched" $? "nothing was installed"

	actual=$(sha256_of "$tmp/$fetched")
	if [ "$actual" != "$expected" ]; then
		die "checksum mismatch for $fetched: expected $expected, got $actual. Nothing was installed."
	fi
	if [ "$fetched" != "$asset" ]; then
		gzip -dc "$tmp/$fetched" >"$tmp/$asset" || die "cannot decompress $fetched (nothing was installed)"
	fi

	mkdir -p "$dir" || die "cannot create $dir"
	refuse_directory
	staged="$dir/.awrepl.install.$$"
	cp "$tmp/$asset" "$staged" 2>/dev/null || die "cannot write to $dir (choose another with --dir)"
	chmod 755 "$staged"
	installed_version=""
	if [ "$native" = yes ]; then
		# Run it from the install directory (a noexec /tmp must not matter) before it replaces anything.
		if ! installed_version=$("$staged" --version 2>&1); then
			die "the downloaded $asset does not run on this machine: $installed_version (nothing was installed)"
		fi
	fi
	# A rename within one directory: atomic, and a running awrepl (the supervisor) keeps its old file.
	mv -f "$staged" "$target" || die "cannot install $target"
	staged=""

	say "installed awrepl${installed_version:+ $installed_version} ($asset, sha256 checked) to $target"
	if on_path "$dir"; then
		cmd="awrepl"
	else
		cmd="$target"
		if [ -n "${GITHUB_PATH:-}" ]; then
			echo "$dir" >>"$GITHUB_PATH"
			say "added $dir to \$GITHUB_PATH for the next steps"
		else
			say "$dir is not on your PATH; add it, e.g. in ~/.profile, ~/.bashrc or ~/.zshrc:"
			say "  export PATH=\"$dir:\$PATH\"        (fish: fish_add_path $dir)"
		fi
	fi
	[ "$native" = yes ] || exit 0
	say "next, check it on this machine:"
	echo "  $cmd --self-test" >&2
}

main "$@"

# awrepl installer for Windows (PowerShell 5.1 and 7+): downloads awrepl-windows-x64.exe from a
# release, checks its SHA-256 against the release's SHA256SUMS, and installs it as awrepl.exe
# (default: ~\.local\bin, the same place as install.sh on Linux and macOS).
#
#   powershell -ExecutionPolicy Bypass -c "irm https://github.com/awrepl/awrepl/releases/latest/download/install.ps1 | iex"
#   .\install.ps1 -Version 0.1.0 -Dir C:\tools\awrepl
#
# Piped into iex, parameters cannot be given: use the environment variables instead.
#   -Version  AWREPL_INSTALL_VERSION   a release version (0.1.0 or v0.1.0); default: latest
#   -Dir      AWREPL_INSTALL_DIR       where to put awrepl.exe; default: ~\.local\bin
#   -BaseUrl  AWREPL_INSTALL_BASE_URL  the directory that holds the release files
# Nothing outside the install directory is changed (the user PATH is not edited: the command to do
# it is printed); a checksum mismatch or a binary that does not run installs nothing. Under GitHub
# Actions ($env:GITHUB_PATH set) the directory is added to the PATH of later steps.
#
# UNTESTED on Windows so far (written on Linux without pwsh): test before publishing.
param(
  # 'latest' is replaced by the release's version in the copy attached to a release (scripts/build.ts).
  [string]$Version = $(if ($env:AWREPL_INSTALL_VERSION) { $env:AWREPL_INSTALL_VERSION } else { 'latest' }),
  [string]$Dir = $(if ($env:AWREPL_INSTALL_DIR) { $env:AWREPL_INSTALL_DIR } else { Join-Path $HOME '.local\bin' }),
  [string]$BaseUrl = $env:AWREPL_INSTALL_BASE_URL
)

$ErrorActionPreference = 'Stop'
Set-StrictMode -Version 2.0
# The GitHub repository whose releases hold awrepl: a placeholder until the first release (README,
# "Releasing": it is package.json's "repository"; tests/packaging/install.test.ts checks they agree).
$Repo = 'awrepl/awrepl'

function Fail([string]$Message) {
  # Not `exit`: piped into iex, that would close the user's window.
  throw "awrepl-install: error: $Message"
}

function Install-Awrepl {
  $arch = $env:PROCESSOR_ARCHITECTURE
  if ($env:PROCESSOR_ARCHITEW6432) { $arch = $env:PROCESSOR_ARCHITEW6432 } # a 32-bit PowerShell on 64-bit Windows
  switch ($arch) {
    'AMD64' { $platform = 'windows-x64' }
    'ARM64' {
      # No native build yet; Windows 11 on ARM runs x64 programs under emulation.
      Write-Host 'awrepl-install: no windows-arm64 build; installing windows-x64 (runs under emulation on Windows 11)'
      $platform = 'windows-x64'
    }
    default { Fail "no awrepl build for this processor: Windows $arch (builds exist for: windows-x64)" }
  }
  $asset = "awrepl-$platform.exe"

  if (-not $BaseUrl) {
    if ($Version -eq 'latest') { $BaseUrl = "https://github.com/$Repo/releases/latest/download" }
    elseif ($Version.StartsWith('v')) { $BaseUrl = "https://github.com/$Repo/releases/download/$Version" }
    else { $BaseUrl = "https://github.com/$Repo/releases/download/v$Version" }
  }
  $BaseUrl = $BaseUrl.TrimEnd('/')
  # A directory (or a link to one) named awrepl.exe would be renamed aside below, with what it holds,
  # and then removed (after a prompt, since it has children) or left behind: refused before anything
  # is downloaded. (Untested, as the rest of this script.)
  $occupied = Join-Path $Dir 'awrepl.exe'
  if (Test-Path -LiteralPath $occupied -PathType Container) {
    Fail "$occupied is a directory (or a link to one): move it away or choose another -Dir (nothing was installed)"
  }

  # Windows PowerShell 5.1 may default to TLS 1.0; the progress bar makes Invoke-WebRequest very slow.
  [Net.ServicePointManager]::SecurityProtocol = [Net.ServicePointManager]::SecurityProtocol -bor [Net.SecurityProtocolType]::Tls12
  $ProgressPreference = 'SilentlyContinue'

  $tmp = Join-Path ([IO.Path]::GetTempPath()) ("awrepl-install-" + [Guid]::NewGuid().ToString('N'))
  New-Item -ItemType Directory -Path $tmp | Out-Null
  try {
    $sumsFile = Join-Path $tmp 'SHA256SUMS'
    try { Invoke-WebRequest -UseBasicParsing -Uri "$BaseUrl/SHA256SUMS" -OutFile $sumsFile }
    catch { Fail "cannot download $BaseUrl/SHA256SUMS (is the version right? nothing was installed): $($_.Exception.Message)" }

    $expected = $null
    foreach ($line in Get-Content -LiteralPath $sumsFile) {
      $parts = $line.Trim() -split '\s+', 2
      if ($parts.Count -eq 2 -and ($parts[1] -eq $asset -or $parts[1] -eq "*$asset")) { $expected = $parts[0].ToLowerInvariant(); break }
    }
    if (-not $expected) { Fail "the release at $BaseUrl has no $asset (SHA256SUMS does not list it; nothing was installed)" }

    $download = Join-Path $tmp $asset
    Write-Host "awrepl-install: downloading $BaseUrl/$asset"
    try { Invoke-WebRequest -UseBasicParsing -Uri "$BaseUrl/$asset" -OutFile $download }
    catch { Fail "cannot download $BaseUrl/$asset (nothing was installed): $($_.Exception.Message)" }

    $actual = (Get-FileHash -Algorithm SHA256 -LiteralPath $download).Hash.ToLowerInvariant()
    if ($actual -ne $expected) { Fail "checksum mismatch for ${asset}: expected $expected, got $actual. Nothing was installed." }

    New-Item -ItemType Directory -Force -Path $Dir | Out-Null
    $Dir = (Resolve-Path -LiteralPath $Dir).Path
    $target = Join-Path $Dir 'awrepl.exe'
    $staged = Join-Path $Dir (".awrepl.install.$PID.exe")
    Copy-Item -LiteralPath $download -Destination $staged -Force
    # Run it before it replaces anything. (2>&1 on a native command throws under 'Stop' in 5.1.)
    $installedVersion = ''
    $runs = $false
    try {
      $installedVersion = (& $staged --version 2>&1 | Out-String).Trim()
      $runs = ($LASTEXITCODE -eq 0)
    } catch { $installedVersion = $_.Exception.Message }
    if (-not $runs) {
      Remove-Item -LiteralPath $staged -Force
      Fail "the downloaded $asset does not run on this machine: $installedVersion (nothing was installed)"
    }
    # A running awrepl.exe (the background supervisor is one) cannot be overwritten, but it can be
    # renamed: move it aside, put the new one in place, and delete the old one when nothing uses it.
    Get-ChildItem -LiteralPath $Dir -Filter '.awrepl.old.*.exe' -ErrorAction SilentlyContinue | ForEach-Object {
      Remove-Item -LiteralPath $_.FullName -Force -ErrorAction SilentlyContinue
    }
    if (Test-Path -LiteralPath $target) {
      $old = Join-Path $Dir (".awrepl.old." + [Guid]::NewGuid().ToString('N') + ".exe")
      try { Move-Item -LiteralPath $target -Destination $old -Force }
      catch { Remove-Item -LiteralPath $staged -Force; Fail "cannot replace $target (stop it with 'awrepl daemon stop' and try again): $($_.Exception.Message)" }
      Move-Item -LiteralPath $staged -Destination $target -Force
      Remove-Item -LiteralPath $old -Force -ErrorAction SilentlyContinue
    } else {
      Move-Item -LiteralPath $staged -Destination $target -Force
    }
  } finally {
    Remove-Item -LiteralPath $tmp -Recurse -Force -ErrorAction SilentlyContinue
  }

  Write-Host "awrepl-install: installed awrepl $installedVersion ($asset, sha256 checked) to $target"
  $onPath = ($env:PATH -split ';' | Where-Object { $_ -and ($_.TrimEnd('\') -ieq $Dir.TrimEnd('\')) }).Count -gt 0
  $cmd = 'awrepl'
  if (-not $onPath) {
    $cmd = "& '$target'"
    if ($env:GITHUB_PATH) {
      Add-Content -LiteralPath $env:GITHUB_PATH -Value $Dir
      Write-Host "awrepl-install: added $Dir to GITHUB_PATH for the next steps"
    } else {
      Write-Host "awrepl-install: $Dir is not on your PATH; to add it for your user (new terminals):"
      Write-Host "  [Environment]::SetEnvironmentVariable('Path', [Environment]::GetEnvironmentVariable('Path', 'User') + ';$Dir', 'User')"
    }
  }
  Write-Host 'awrepl-install: next, check it on this machine:'
  Write-Host "  $cmd --self-test"
}

Install-Awrepl

#!/usr/bin/env bash
# Compile the Samvad C# client with Mono:
#   clients/unity/bin/Samvad.Client.dll  the library (no Unity dependencies)
#   clients/unity/bin/UnityStandIn.dll   a stand-in for the Unity API, for tests only (StandIn/)
#   clients/unity/bin/Samvad.Unity.dll   the MonoBehaviours (Samvad.Unity/) against the stand-in,
#                                        as Unity compiles them without XRI or TextMeshPro
#   clients/unity/bin/Samvad.Unity.TmpXri.dll  the same with SAMVAD_TMP and SAMVAD_XRI defined
#   clients/unity/bin/Harness.exe        the console harness (run it with `mono`); its --scene mode
#                                        drives the TmpXri build in the stand-in's player loop
#   clients/unity/bin/Newtonsoft.Json.dll copied next to them
# Newtonsoft.Json comes from Debian's libnewtonsoft-json-cil-dev; set NEWTONSOFT_JSON_DLL to use
# another copy. Fails loudly when mcs, mono or Newtonsoft.Json is missing.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin="$here/bin"

die() { echo "unity/build.sh: $*" >&2; exit 1; }

command -v mcs >/dev/null 2>&1 || die "mcs not found (apt-get install mono-devel)"
command -v mono >/dev/null 2>&1 || die "mono not found (apt-get install mono-runtime)"

find_newtonsoft() {
  if [ -n "${NEWTONSOFT_JSON_DLL:-}" ]; then
    [ -f "$NEWTONSOFT_JSON_DLL" ] || die "NEWTONSOFT_JSON_DLL=$NEWTONSOFT_JSON_DLL does not exist"
    echo "$NEWTONSOFT_JSON_DLL"
    return
  fi
  # Debian's pkg-config file names the real path (it is /usr/lib/cli/Newtonsoft.Json-5.0/ on
  # Debian 12, whatever the package version says).
  if command -v pkg-config >/dev/null 2>&1 && pkg-config --exists newtonsoft-json 2>/dev/null; then
    local ref
    ref="$(pkg-config --libs newtonsoft-json | tr ' ' '\n' | sed -n 's/^-r://p' | head -n 1)"
    if [ -n "$ref" ] && [ -f "$ref" ]; then
      echo "$ref"
      return
    fi
  fi
  local candidate
  for candidate in /usr/lib/cli/Newtonsoft.Json/Newtonsoft.Json.dll /usr/lib/cli/Newtonsoft.Json-*/Newtonsoft.Json.dll; do
    if [ -f "$candidate" ]; then
      echo "$candidate"
      return
    fi
  done
  die "Newtonsoft.Json.dll not found (apt-get install libnewtonsoft-json-cil-dev, or set NEWTONSOFT_JSON_DLL)"
}

newtonsoft="$(find_newtonsoft)"
mkdir -p "$bin"
cp -f "$newtonsoft" "$bin/Newtonsoft.Json.dll"

# C# 7.2 is the newest language mcs knows; the sources keep to what Unity 2021+ compiles too.
common=(-langversion:7.2 -debug- -optimize+ -warnaserror+ -nowarn:1591 -nologo)

mcs "${common[@]}" -target:library -out:"$bin/Samvad.Client.dll" \
  -r:System.dll -r:System.Core.dll -r:System.Net.Http.dll -r:"$bin/Newtonsoft.Json.dll" \
  "$here"/Samvad.Client/*.cs

mcs "${common[@]}" -target:library -out:"$bin/UnityStandIn.dll" \
  -r:System.dll -r:System.Core.dll \
  "$here"/StandIn/*.cs

# The components, once as a project without the optional packages has them and once with both.
unity_refs=(-r:System.dll -r:System.Core.dll -r:System.Net.Http.dll -r:"$bin/Newtonsoft.Json.dll"
            -r:"$bin/Samvad.Client.dll" -r:"$bin/UnityStandIn.dll")
mcs "${common[@]}" -target:library -out:"$bin/Samvad.Unity.dll" -define:UNITY_5_3_OR_NEWER \
  "${unity_refs[@]}" "$here"/Samvad.Unity/*.cs
mcs "${common[@]}" -target:library -out:"$bin/Samvad.Unity.TmpXri.dll" \
  "-define:UNITY_5_3_OR_NEWER;SAMVAD_TMP;SAMVAD_XRI" \
  "${unity_refs[@]}" "$here"/Samvad.Unity/*.cs

mcs "${common[@]}" -target:exe -out:"$bin/Harness.exe" \
  -r:System.dll -r:System.Core.dll -r:System.Net.Http.dll \
  -r:"$bin/Newtonsoft.Json.dll" -r:"$bin/Samvad.Client.dll" \
  -r:"$bin/UnityStandIn.dll" -r:"$bin/Samvad.Unity.TmpXri.dll" \
  "$here"/Harness/*.cs

echo "unity/build.sh: built $bin/Samvad.Client.dll, $bin/UnityStandIn.dll, $bin/Samvad.Unity.dll," \
     "$bin/Samvad.Unity.TmpXri.dll and $bin/Harness.exe (Newtonsoft.Json from $newtonsoft)"

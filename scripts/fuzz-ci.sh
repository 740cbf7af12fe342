#!/usr/bin/env bash
# scripts/fuzz-ci.sh XML SECONDS: the CI suite `fuzz`. Builds every libFuzzer
# target if needed (scripts/test.sh has built them before, so the build time
# is not the suite's), runs each from its seed
# corpus (tests/fuzz/corpus/) for a share of SECONDS, two at a time (the
# machine has two cores), and writes one JUnit test case per target to XML:
# failed when the target crashed, leaked or hung, with the report and the
# input that did it. By hand: scripts/fuzz.sh TARGET SECONDS.
set -uo pipefail
cd "$(dirname "$0")/.."
xml=$1 total=$2
# shellcheck source=fuzz.sh
source scripts/fuzz.sh
mapfile -t all < <(targets)
logs=$(mktemp -d /tmp/paddock-fuzz.XXXXXX)
trap 'rm -rf "$logs"' EXIT

t0=$SECONDS
if ! fuzz_build "${all[@]}" >"$logs/build.log" 2>&1; then
  cat "$logs/build.log"
  echo "fuzz: build failed"
  exit 1
fi
echo "fuzz: build-fuzz up to date in $((SECONDS - t0))s"

# two lanes: each target gets 2*total/N seconds of the total wall time
each=$(( 2 * total / ${#all[@]} ))
((each < 5)) && each=5
echo "fuzz: ${#all[@]} targets, ${each}s each, two at a time"
export -f fuzz_run fuzz_env
export top
printf '%s\n' "${all[@]}" | xargs -P 2 -I{} bash -c \
  'fuzz_run {} '"$each"' >"'"$logs"'/{}.log" 2>&1; echo $? >"'"$logs"'/{}.rc"'

/usr/bin/python3 - "$xml" "$logs" "${all[@]}" <<'PY'
import glob, os, re, sys
import xml.etree.ElementTree as ET
xml, logs, targets = sys.argv[1], sys.argv[2], sys.argv[3:]
suite = ET.Element("testsuite", name="fuzz")
bad = 0
for t in targets:
    log = open(os.path.join(logs, t + ".log"), errors="replace").read()
    rc = int(open(os.path.join(logs, t + ".rc")).read().strip() or 1)
    stats = dict(re.findall(r"stat::(\w+):\s+(\d+)", log))
    done = re.findall(r"#(\d+)\s+DONE\s+cov: (\d+) ft: \d+ corp: (\d+)/", log)
    line = "%s: %s runs, %s exec/s, cov %s, corpus %s" % (
        t, stats.get("number_of_executed_units", "?"), stats.get("average_exec_per_sec", "?"),
        done[-1][1] if done else "?", done[-1][2] if done else "?")
    print("fuzz: " + line + ("" if rc == 0 else " -- FAILED (exit %d)" % rc))
    case = ET.SubElement(suite, "testcase", classname="fuzz", name=t)
    if rc != 0:
        bad += 1
        art = re.findall(r"Test unit written to (\S+)", log)
        f = ET.SubElement(case, "failure", message="fuzz-%s exit %d%s" % (t, rc, (", input " + art[-1]) if art else ""))
        f.text = log[-8000:]
        print(log[-4000:])
    else:
        ET.SubElement(case, "system-out").text = line
ET.ElementTree(suite).write(xml)
sys.exit(1 if bad else 0)
PY

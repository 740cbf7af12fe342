#!/usr/bin/env python3
"""Add up the JUnit XML files of every suite and print the closing line
"N passed, N failed, N skipped". A suite that crashed before writing its
file counts as one failure, so a broken suite can never look green."""
import pathlib
import sys
import xml.etree.ElementTree as ET

results = pathlib.Path(sys.argv[1])
passed = failed = skipped = 0
for rc_file in sorted(results.glob("*.rc")):
    name = rc_file.stem
    xml = results / f"{name}.xml"
    rc = int(rc_file.read_text().strip() or 1)
    if not xml.exists():
        print(f"suite {name}: no results (exit {rc}), counted as one failure")
        failed += 1
        continue
    root = ET.parse(xml).getroot()
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    s_pass = s_fail = s_skip = 0
    for ts in suites:
        for case in ts.iter("testcase"):
            if case.find("failure") is not None or case.find("error") is not None:
                s_fail += 1
                print(f"FAILED {name}: {case.get('classname', '')}::{case.get('name')}")
            elif case.find("skipped") is not None:
                s_skip += 1
                reason = case.find("skipped").get("message", "")
                print(f"SKIPPED {name}: {case.get('name')}: {reason}")
            else:
                s_pass += 1
    if rc != 0 and s_fail == 0:
        print(f"suite {name}: exit {rc} without a failed test, counted as one failure")
        s_fail += 1
    passed, failed, skipped = passed + s_pass, failed + s_fail, skipped + s_skip
print(f"{passed} passed, {failed} failed, {skipped} skipped")
sys.exit(1 if failed else 0)

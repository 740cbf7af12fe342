#!/usr/bin/env python3
"""Add up the JUnit XML files of every suite and print the closing line
"N passed, N failed, N skipped", naming every failed and skipped test. A
suite that crashed before writing its file counts as one failure, so a
broken suite can never look green.

Usage: summarize-junit.py RESULTS_DIR (NAME.rc holds each suite's exit
status, NAME.xml its JUnit file).

Three writers, three shapes, all handled by walking every <testcase> at any
depth and naming it after the <testsuite> elements around it:
  pytest  <testsuites><testsuite name="pytest"><testcase classname=...>
  meson   <testsuites><testsuite name="paddock.ring"><testcase ...>
  node 20 <testsuites><testcase .../><testsuite name="describe">... : a
          top-level test() is a <testcase> directly under <testsuites>, and
          its classname is always "test"."""
import pathlib
import sys
import xml.etree.ElementTree as ET


def walk(elem, suites=()):
    """Yield (enclosing suite names, testcase) for every testcase."""
    for child in elem:
        if child.tag == "testcase":
            yield suites, child
        elif child.tag == "testsuite":
            yield from walk(child, suites + (child.get("name", ""),))


def label(suites, case):
    cls = case.get("classname", "")
    if cls and cls != "test":
        return f"{cls}::{case.get('name')}"
    return " > ".join([s for s in suites if s] + [case.get("name", "")])


def first_line(text, limit=200):
    line = (text or "").strip().splitlines()
    return line[0][:limit] if line else ""


def node_summary(xml):
    """node writes its own counts as comments (<!-- fail 1 -->); some
    failures (a test's own body failing after its subtests passed) appear
    only there."""
    parser = ET.XMLParser(target=ET.TreeBuilder(insert_comments=True))
    root = ET.parse(xml, parser).getroot()
    words = [c.text.strip() for c in root if c.tag is ET.Comment and c.text]
    return ", ".join(w for w in words if w.split()[0] in ("tests", "pass", "fail", "cancelled"))


def summarize(results):
    passed = failed = skipped = 0
    for rc_file in sorted(results.glob("*.rc")):
        name = rc_file.stem
        xml = results / f"{name}.xml"
        rc = int(rc_file.read_text().strip() or 1)
        if not xml.exists():
            print(f"suite {name}: no results (exit {rc}), counted as one failure")
            failed += 1
            continue
        try:
            root = ET.parse(xml).getroot()
        except ET.ParseError as e:
            print(f"suite {name}: unreadable {xml.name} ({e}), exit {rc}; counted as one failure")
            failed += 1
            continue
        s_pass = s_fail = s_skip = 0
        for suites, case in walk(root if root.tag == "testsuites" else [root]):
            bad = case.find("failure")
            if bad is None:
                bad = case.find("error")
            if bad is not None:
                s_fail += 1
                why = first_line(bad.get("message")) or first_line(bad.text)
                print(f"FAILED {name}: {label(suites, case)}" + (f": {why}" if why else ""))
            elif case.find("skipped") is not None:
                s_skip += 1
                reason = case.find("skipped").get("message", "")
                print(f"SKIPPED {name}: {label(suites, case)}: {reason}")
            else:
                s_pass += 1
        if rc != 0 and s_fail == 0:
            own = node_summary(xml)
            print(f"suite {name}: exit {rc} without a failed test, counted as one failure"
                  + (f" (the runner's own count: {own})" if own else ""))
            s_fail += 1
        passed, failed, skipped = passed + s_pass, failed + s_fail, skipped + s_skip
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: summarize-junit.py RESULTS_DIR")
    sys.exit(summarize(pathlib.Path(sys.argv[1])))

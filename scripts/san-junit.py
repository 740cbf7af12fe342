#!/usr/bin/env python3
"""scripts/san-junit.py XML LOGDIR: add one failed test case per sanitizer
report in LOGDIR that no test claimed (tests/conftest.py renames the ones
it reported to *.reported) to the JUnit file XML, so a report from a
process that outlived its test, or from a C unit test's forked child, still
fails its suite. Creates XML if the suite wrote none."""
import os
import sys
import xml.etree.ElementTree as ET

xml_path, logdir = sys.argv[1], sys.argv[2]
reports = []
if os.path.isdir(logdir):
    for name in sorted(os.listdir(logdir)):
        path = os.path.join(logdir, name)
        if name.endswith(".reported") or not os.path.isfile(path):
            continue
        with open(path, errors="replace") as f:
            text = f.read()
        if text.strip():
            reports.append((name, text))
if not reports:
    sys.exit(0)
if os.path.exists(xml_path):
    tree = ET.parse(xml_path)
    root = tree.getroot()
else:
    root = ET.Element("testsuites")
    tree = ET.ElementTree(root)
suite = root if root.tag == "testsuite" else root.find("testsuite")
if suite is None:
    suite = ET.SubElement(root, "testsuite", name="sanitizer")
for name, text in reports:
    case = ET.SubElement(suite, "testcase", classname="sanitizer", name="report " + name)
    fail = ET.SubElement(case, "failure", message="sanitizer report %s outside any test" % name)
    fail.text = text[-8000:]
    print("sanitizer report %s (%s):\n%s" % (name, logdir, text[-3000:]))
tree.write(xml_path)

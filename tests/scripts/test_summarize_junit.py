"""scripts/summarize-junit.py (issue 12, item 14) on crafted results dirs in
the three shapes scripts/test.sh collects: pytest, meson and node 20's JUnit
reporter (top-level tests as <testcase> directly under <testsuites>)."""
import os
import subprocess
import sys

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                      "scripts", "summarize-junit.py")

PYTEST = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="1"
failures="1" skipped="1" tests="5"><testcase classname="tests.oci.test_x" name="test_ok" />
<testcase classname="tests.oci.test_x" name="test_ok2" />
<testcase classname="tests.oci.test_x" name="test_bad"><failure message="assert 1 == 2">E   assert 1 == 2
</failure></testcase><testcase classname="tests.oci.test_x" name="test_sk"><skipped type="pytest.skip"
message="no kvm">x.py:4: no kvm</skipped></testcase><testcase classname="tests.oci.test_x"
name="test_err"><error message="failed on setup with &quot;RuntimeError: setup&quot;">E</error></testcase>
</testsuite></testsuites>"""

MESON = """<?xml version='1.0' encoding='utf-8'?>
<testsuites tests="3" errors="0" failures="0"><testsuite name="paddock.ring" tests="2" errors="0"
failures="0" skipped="0"><testcase name="1 - idle ring allocates nothing" classname="paddock.ring" />
<testcase name="2 - empty ring reads nothing" classname="paddock.ring" /></testsuite>
<testsuite name="paddock.seccomp" tests="1" errors="0" failures="0" skipped="1">
<testcase name="1 - i386 entry" classname="paddock.seccomp"><skipped /></testcase></testsuite></testsuites>"""

# As node v20.20.2 --test-reporter=junit writes it (stack traces trimmed).
NODE = """<?xml version="1.0" encoding="utf-8"?>
<testsuites>
	<testcase name="create and kill" time="0.001717" classname="test"/>
	<testcase name="files round trip" time="0.001728" classname="test" failure="1 == 2">
		<failure type="testCodeFailure" message="1 == 2">
[Error [ERR_TEST_FAILURE]: 1 == 2] {
  code: 'ERR_TEST_FAILURE',
}
		</failure>
	</testcase>
	<testcase name="interpreter" time="0.000227" classname="test">
		<skipped type="skipped" message="no python"/>
	</testcase>
	<testsuite name="commands" time="0.006705" disabled="0" errors="0" tests="3" failures="1" skipped="0" hostname="vm">
		<testcase name="run echo" time="0.000362" classname="test"/>
		<testcase name="stdin" time="0.000324" classname="test" failure="boom">
			<failure type="testCodeFailure" message="boom">
Error [ERR_TEST_FAILURE]: boom
			</failure>
		</testcase>
		<testsuite name="pty" time="0.005307" disabled="0" errors="0" tests="1" failures="0" skipped="0" hostname="vm">
			<testcase name="resize" time="0.000368" classname="test"/>
		</testsuite>
	</testsuite>
	<!-- tests 6 -->
	<!-- suites 2 -->
	<!-- pass 3 -->
	<!-- fail 2 -->
	<!-- cancelled 0 -->
	<!-- skipped 1 -->
	<!-- todo 0 -->
	<!-- duration_ms 311.679929 -->
</testsuites>"""

# A test whose own body failed after its subtests passed: node 20 leaves the
# failure out of the XML and counts it only in its comments.
NODE_HIDDEN = """<?xml version="1.0" encoding="utf-8"?>
<testsuites>
	<testsuite name="parent2" time="0.002324" disabled="0" errors="0" tests="1" failures="0" skipped="0" hostname="vm">
		<testcase name="child ok" time="0.001107" classname="test"/>
	</testsuite>
	<!-- tests 2 -->
	<!-- suites 0 -->
	<!-- pass 1 -->
	<!-- fail 1 -->
	<!-- cancelled 0 -->
	<!-- skipped 0 -->
	<!-- todo 0 -->
	<!-- duration_ms 174.821803 -->
</testsuites>"""


def results(tmp_path, suites):
    for name, (rc, xml) in suites.items():
        (tmp_path / (name + ".rc")).write_text("%d\n" % rc)
        if xml is not None:
            (tmp_path / (name + ".xml")).write_text(xml)
    return tmp_path


def summarize(d):
    p = subprocess.run([sys.executable, SCRIPT, str(d)], capture_output=True, text=True, timeout=30)
    assert p.stderr == ""
    lines = p.stdout.splitlines()
    return p.returncode, lines[-1], lines[:-1]


def test_all_three_shapes(tmp_path):
    rc, last, lines = summarize(results(tmp_path, {"oci": (1, PYTEST), "unit": (0, MESON), "e2b": (1, NODE)}))
    # pytest 2 passed 2 failed 1 skipped; meson 2/0/1; node 3/2/1
    assert last == "7 passed, 4 failed, 3 skipped"
    assert rc == 1
    assert "FAILED e2b: files round trip: 1 == 2" in lines
    assert "FAILED e2b: commands > stdin: boom" in lines
    assert "SKIPPED e2b: interpreter: no python" in lines
    assert "FAILED oci: tests.oci.test_x::test_bad: assert 1 == 2" in lines
    assert any(l.startswith("FAILED oci: tests.oci.test_x::test_err: failed on setup") for l in lines)
    assert "SKIPPED unit: paddock.seccomp::1 - i386 entry: " in lines
    assert not any("without a failed test" in l for l in lines)


def test_green(tmp_path):
    rc, last, lines = summarize(results(tmp_path, {"unit": (0, MESON)}))
    assert (rc, last) == (0, "2 passed, 0 failed, 1 skipped")


def test_failure_only_in_the_exit_status(tmp_path):
    rc, last, lines = summarize(results(tmp_path, {"e2b": (1, NODE_HIDDEN), "net": (124, None)}))
    assert last == "1 passed, 2 failed, 0 skipped"
    assert rc == 1
    assert any("suite e2b: exit 1 without a failed test" in l and "fail 1" in l for l in lines), lines
    assert "suite net: no results (exit 124), counted as one failure" in lines


def test_unreadable_xml_is_a_failure(tmp_path):
    rc, last, lines = summarize(results(tmp_path, {"sdk": (0, "<testsuites><testcase")}))
    assert (rc, last) == (1, "0 passed, 1 failed, 0 skipped")
    assert any(l.startswith("suite sdk: unreadable sdk.xml") for l in lines)

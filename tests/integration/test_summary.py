"""The text summary `record` prints: its thread table keeps its columns
whatever the thread names (long ones are cut with an ellipsis)."""

from conftest import run_pyscope


def test_thread_table_stays_aligned_with_long_names(interp, start_program, tmp_path):
    target = start_program(interp, "long_names.py")
    names = target.report["extra"]["names"]
    result = run_pyscope(["record", "-q", "--idle", "-d", "0.5", "-o", tmp_path / "out.txt",
                          "-p", target.pid])
    assert result.returncode == 0, result
    lines = result.stderr.splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith("Thread "))
    table = lines[start:start + 1 + len(names) + 1]
    assert len({len(l) for l in table}) == 1, "\n".join(table)
    # Every column starts where the header's does.
    where = table[0].index("Samples") + len("Samples")
    for row in table[1:]:
        assert row[where - 1].isdigit() and row[where] == " ", "\n".join(table)
    shown = "\n".join(table)
    assert '"w"' in shown
    for name in names[1:]:
        assert name not in shown
        assert name[:20] in shown
    assert shown.count("\u2026") == 2, shown

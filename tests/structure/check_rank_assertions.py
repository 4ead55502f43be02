#!/usr/bin/env python3
"""Boost.Test's assertion macros are not thread-safe: each one, passing or not, updates shared
counters and the "last checkpoint" string, and two rank threads asserting at once have corrupted
that string in CI (std::length_error from inside Boost). Rank threads therefore record what they
saw and the test thread checks it, or they hold a lock around the assertion.

This check finds assertions written inside a lambda that runs on several rank threads
(run_inprocess with more than one rank, run_on_ranks, train_pipeline, std::thread, std::async, a
thread emplaced from a lambda) without a lock taken earlier in an enclosing scope. Usage: check_rank_assertions.py TESTS_DIR"""
import pathlib
import re
import sys

RANK_LAMBDA = re.compile(r"(\b(run_inprocess|run_on_ranks|train_pipeline|std::thread|std::async)\b.*\[|emplace_back\(\[)")
ONE_RANK = re.compile(r"\brun_inprocess\(\s*1\s*,")
ASSERTION = re.compile(r"\bBOOST_(TEST|CHECK|REQUIRE|FAIL|ERROR|WARN)")
LOCK = re.compile(r"\b(lock_guard|unique_lock|scoped_lock)\b")


def indent(line):
    return len(line) - len(line.lstrip())


def body_of(lines, start):
    """The lines from `start` to the brace that closes the first one opened there."""
    depth, opened = 0, False
    for end in range(start, len(lines)):
        for ch in lines[end]:
            if ch == "{":
                depth, opened = depth + 1, True
            elif ch == "}":
                depth -= 1
        if opened and depth <= 0:
            return range(start, end + 1)
    return range(start, len(lines))


def unlocked_assertions(path):
    lines = path.read_text().split("\n")
    found, at = [], 0
    while at < len(lines):
        line = lines[at]
        if RANK_LAMBDA.search(line) and not ONE_RANK.search(line) and not line.lstrip().startswith("//"):
            body = body_of(lines, at)
            for k in body:
                if k == at or not ASSERTION.search(lines[k]):
                    continue
                locked = any(LOCK.search(lines[j]) and indent(lines[j]) <= indent(lines[k]) for j in range(at, k))
                if not locked:
                    found.append((k + 1, lines[k].strip()))
            at = body[-1]
        at += 1
    return found


def main():
    root = pathlib.Path(sys.argv[1])
    problems = 0
    for path in sorted(p for p in root.rglob("*") if p.suffix in (".cpp", ".hpp")):
        for line_no, text in unlocked_assertions(path):
            print(f"{path}:{line_no}: assertion on a rank thread without a lock: {text}")
            problems += 1
    if problems:
        print(f"{problems} assertion(s) on rank threads: record on the rank, check on the test thread, "
              "or hold assertion_mutex() (tests/unit/sharding_test_support.hpp)")
        return 1
    print("no unlocked assertions on rank threads")
    return 0


if __name__ == "__main__":
    sys.exit(main())

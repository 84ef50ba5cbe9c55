"""The shared pieces of the console's Runs pages and `clawgate trace show`: one run's decision
tree (runtime/tracing/tree.py: a resumed run beneath the pause it resumed) and the runs the
audit trail tells of (runtime/run_trail.py)."""

from __future__ import annotations

from runtime.audit import AuditEntry
from runtime.run_trail import by_conversation, runs
from runtime.tracing.document import AttributeValue, SpanDoc, TraceDoc, TraceLink
from runtime.tracing.tree import Linked, span_lines, tree


def span(name: str, status: str, *children: SpanDoc, **attributes: AttributeValue) -> SpanDoc:
    return SpanDoc(
        id=name, name=name, status=status, start_ms=0, attributes=attributes,
        children=list(children),
    )  # fmt: skip


def doc(trace_id: str, root: SpanDoc, *links: TraceLink) -> TraceDoc:
    return TraceDoc(
        trace_id=trace_id, mode="metadata", session="s1", started_at=0, duration_ms=1,
        links=list(links), root=root,
    )  # fmt: skip


def paused_run() -> Linked:
    pause = span("approval.pause", "pending", approval_id="a1")
    call = span("tool.call", "suspended", pause, tool="bash", index=0)
    paused = doc("t1", span("agent.run", "approval_required", span("agent.step", "ok", call)))
    resume = span("approval.resume", "final", decision="approved")
    resumed = doc("t2", resume, TraceLink(trace_id="t1", approval_id="a1"))
    stray = doc("t3", span("approval.expired", "expired"), TraceLink(trace_id="t1"))
    return Linked(paused, [Linked(resumed), Linked(stray)])


def test_a_resumed_run_hangs_beneath_the_pause_it_resumed_and_others_beneath_the_root() -> None:
    root = tree(paused_run())
    step = root.children[0]
    pause = step.children[0].children[0]
    assert step.children[0].lines == ["tool.call bash #0 suspended"]
    assert pause.approval == "a1"
    (resumed,) = pause.children
    assert (resumed.resumed, resumed.lines[0]) == ("t2", "approval.resume final  decision=approved")
    assert [c.resumed for c in root.children] == ["", "t3"]  # no pause of its own: the root's
    assert root.resumed == "" and step.approval == ""
    assert paused_run().trace_ids() == ["t1", "t2", "t3"]


def test_a_span_line_names_status_duration_short_hashes_and_payloads() -> None:
    called = span("llm.call", "ok", provider="openai:x", prompt_sha256="ab" * 32, note="two words")
    called.duration_ms = 1500
    called.payloads["input"] = "line one\nline two"
    assert span_lines(called) == [
        'llm.call openai:x ok 1.50 s  prompt_sha256=abababababab note="two words"',
        "input: line one line two",
    ]


def entry(n: int, event: str, trace: str, actor: str = "", **fields: str) -> AuditEntry:
    return AuditEntry(id=f"{n}-0", at=n, event=event, actor=actor, trace=trace, fields=fields)


def test_runs_from_the_audit_trail_carry_their_calls_approvals_outcomes_and_resumes() -> None:
    here = {"conversation": "c1", "session": "s1"}
    found = runs(
        [
            entry(1, "tool_executed", "t1", "alice", tool="bash", status="suspended", **here),
            entry(2, "approval_requested", "t1", "alice", approval="a1", tool="bash",
                  requester="alice", reasons="uses token=sk-abcdefghijklmnopqrstuv", **here),
            entry(3, "approval_decided", "t1", "carol", approval="a1", decision="approved", **here),
            entry(4, "tool_executed", "t2", "alice", tool="bash", status="completed",
                  approval="a1", **here),
            entry(5, "command", "", "bob", name="help", conversation="c2"),  # no run
            entry(6, "tool_executed", "t3", "bob", tool="read", status="completed",
                  conversation="c2"),
            entry(7, "approval_requested", "t1b", "alice", approval="a2", tool="bash", **here),
            entry(8, "approval_expired", "t1b", approval="a2", **here),
        ]
    )  # fmt: skip
    assert [r.trace for r in found] == ["t1b", "t3", "t2", "t1"]  # newest first
    t1b, t3, t2, t1 = found
    assert (t1.conversation, t1.session, t1.asked_by) == ("c1", "s1", "alice")
    assert [(c.tool, c.status) for c in t1.calls] == [("bash", "suspended")]
    (asked,) = t1.asked
    assert (asked.id, asked.outcome, asked.by) == ("a1", "approved", "carol")
    assert "sk-abcdefghijklmnopqrstuv" not in asked.reasons  # redacted
    assert t1.resumed_by == ["t2"] and not t1.waiting
    assert t2.resumes == {"a1": "t1"} and t2.asked == []
    assert t1b.asked[0].outcome == "expired"
    assert (t3.conversation, t3.asked_by) == ("c2", "bob")
    assert list(by_conversation(found, 1).items()) == [("c1", [t1b]), ("c2", [t3])]


def test_a_run_waiting_for_its_approval_says_so() -> None:
    (run,) = runs([entry(1, "approval_requested", "t1", "alice", approval="a1", tool="bash")])
    assert run.waiting and run.asked[0].outcome == "pending"

"""Every shared chat template rendered for every committed conversation by
`pagoda chat-template --batch` and by jinja2 configured as transformers
configures it (hf_jinja.py): byte-identical text, or an error in both (with
the same raise_exception message)."""
import copy

import pytest

import hf_jinja
import jinja_harness as h

# Llama 3.x templates print today's date unless date_string is given.
FIXED_KWARGS = {"date_string": "26 Jul 2024"}

TEMPLATES = h.model_templates()


def chat_cases():
    cases = []
    for template_id, source, bos, eos in TEMPLATES:
        for conv_name, conv in h.conversations():
            for kwargs in conv.get("kwargs_variants", [{}]):
                for add_generation_prompt in (False, True):
                    cases.append({
                        "id": f"{template_id}/{conv_name}/agp={add_generation_prompt}/{kwargs}",
                        "template_id": template_id,
                        "template": source,
                        "messages": conv["messages"],
                        "tools": conv.get("tools"),
                        "documents": conv.get("documents"),
                        "add_generation_prompt": add_generation_prompt,
                        "bos_token": bos or "",
                        "eos_token": eos or "",
                        "kwargs": {**FIXED_KWARGS, **kwargs},
                    })
    return cases


def reference(case):
    return hf_jinja.render_chat(
        case["template"], copy.deepcopy(case["messages"]), tools=copy.deepcopy(case["tools"]),
        documents=copy.deepcopy(case["documents"]), add_generation_prompt=case["add_generation_prompt"],
        bos_token=case["bos_token"] or None, eos_token=case["eos_token"] or None, **case["kwargs"])


@pytest.fixture(scope="module")
def rendered():
    cases = chat_cases()
    results = h.run_batch([{k: v for k, v in c.items() if k not in ("id", "template_id")} for c in cases])
    return list(zip(cases, results))


def test_there_is_something_to_compare():
    assert len(TEMPLATES) >= 14, "shared chat templates are missing"
    assert len(h.conversations()) >= 12


@pytest.mark.parametrize("template_id", [t[0] for t in TEMPLATES])
def test_template_matches_transformers(rendered, template_id):
    checked = 0
    for case, result in rendered:
        if case["template_id"] != template_id:
            continue
        kind, expected = reference(case)
        if kind == "ok":
            assert "output" in result, f"{case['id']}: jinja2 rendered, pagoda failed: {result['error']}"
            assert result["output"] == expected, case["id"]
        else:
            assert "error" in result, f"{case['id']}: jinja2 raised {expected}, pagoda rendered"
            if expected.startswith("TemplateError: "):  # raise_exception: same message
                assert expected[len("TemplateError: "):] in result["error"], case["id"]
        checked += 1
    assert checked > 0


def continue_cases():
    """Every shared template with every conversation that ends in an
    assistant message, continued (continue_final_message, no generation prompt)."""
    cases = []
    for template_id, source, bos, eos in TEMPLATES:
        for conv_name, conv in h.conversations():
            if conv["messages"][-1]["role"] != "assistant":
                continue
            cases.append({
                "id": f"{template_id}/{conv_name}/continue",
                "template": source,
                "messages": conv["messages"],
                "tools": conv.get("tools"),
                "documents": conv.get("documents"),
                "continue_final_message": True,
                "bos_token": bos or "",
                "eos_token": eos or "",
                "kwargs": FIXED_KWARGS,
            })
    return cases


def test_continue_final_message_matches_transformers():
    cases = continue_cases()
    results = h.run_batch([{k: v for k, v in c.items() if k != "id"} for c in cases])
    num_open = 0
    for case, result in zip(cases, results):
        kind, expected = hf_jinja.render_chat(
            case["template"], copy.deepcopy(case["messages"]), tools=copy.deepcopy(case["tools"]),
            documents=copy.deepcopy(case["documents"]), continue_final_message=True,
            bos_token=case["bos_token"] or None, eos_token=case["eos_token"] or None, **case["kwargs"])
        if kind == "ok":
            assert result.get("output") == expected, (case["id"], result)
            num_open += 1
        else:
            assert "error" in result, f"{case['id']}: transformers refuses ({expected}), pagoda rendered"
    assert num_open >= 10, f"only {num_open} continued conversations rendered"


def test_broken_templates_error_in_both():
    messages = [{"role": "user", "content": "hi"}]
    broken = [
        "{% for m in messages %}{{ m.content }}",            # unclosed block
        "{{ messages[0].content | no_such_filter }}",         # unknown filter
        "{{ messages[0].missing.attribute }}",                # undefined attribute access
        "{% if messages|length > 0 %}{{ raise_exception('No user turn allowed') }}{% endif %}",
        "{{ messages[0]['content'] + 1 }}",                   # str + int
        "{% set x = messages[0].content %}{{ x.append(1) }}",  # sandbox: no str.append / unsafe
    ]
    results = h.run_batch([{"template": t, "messages": messages} for t in broken])
    for source, result in zip(broken, results):
        kind, message = hf_jinja.render_chat(source, copy.deepcopy(messages))
        assert kind == "error", source
        assert "error" in result, f"{source}: pagoda rendered {result}"
    assert "No user turn allowed" in results[3]["error"]

"""A missing optional extra is one typed error naming the extra to install."""

import importlib
import sys

import pytest

from ctxstore import ConfigurationError, MissingExtraError

CASES = [
    ("ctxstore.adapters.integrations.agents_session", "agents", "ctxstore[agents]"),
    ("ctxstore.adapters.integrations.langchain_history", "langchain_core", "ctxstore[langchain]"),
    ("ctxstore.adapters.integrations.claude_session_store", "claude_agent_sdk", "ctxstore[claude]"),
]


@pytest.mark.parametrize(("module", "dependency", "extra"), CASES)
def test_an_integration_without_its_extra_names_it(monkeypatch, module, dependency, extra):
    for name in list(sys.modules):
        if name in (dependency, module) or name.startswith(dependency + "."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, dependency, None)  # import fails as if not installed
    with pytest.raises(MissingExtraError, match=extra.replace("[", r"\[").replace("]", r"\]")):
        importlib.import_module(module)


def test_the_openai_summarizer_without_its_extra_names_it(monkeypatch):
    from ctxstore.adapters.llm.summarizers import OpenAISummarizer

    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(ConfigurationError, match=r"ctxstore\[openai\]"):
        OpenAISummarizer("gpt-4o-mini")

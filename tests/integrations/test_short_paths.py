"""`ctxstore.integrations.<sdk>`: the short import paths give the integrations' own objects,
and each loads only its own SDK."""

import importlib
import subprocess
import sys

import pytest

# short path -> (the modules it re-exports, the SDK packages importing it may load)
SHORT_PATHS = {
    "agents": (["agents_session"], {"agents"}),
    "langgraph": (["langgraph_saver"], {"langgraph", "langchain_core"}),  # LangGraph's own base
    "claude": (["claude_session_store"], {"claude_agent_sdk"}),
    "adk": (["adk_session_service", "adk_memory_service"], {"google.adk"}),
    "langchain": (["langchain_history"], {"langchain_core"}),
    "llamaindex": (["llamaindex_chat_store"], {"llama_index"}),
    "pydantic_ai": (["pydantic_ai_store"], {"pydantic_ai"}),
    "agent_framework": (["agent_framework_history"], {"agent_framework"}),
}
SDKS = sorted(set().union(*(sdks for _, sdks in SHORT_PATHS.values())))
LOADED_SDKS = (
    "import importlib, sys; importlib.import_module(sys.argv[1]); "
    f"print(' '.join(s for s in {SDKS!r} if s in sys.modules))"
)


def sdks_loaded_by(module: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", LOADED_SDKS, module],
        check=True, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    return set(done.stdout.split())


@pytest.mark.parametrize("short", sorted(SHORT_PATHS))
def test_a_short_path_exports_the_integrations_own_objects(short):
    module = importlib.import_module(f"ctxstore.integrations.{short}")
    olds = [
        importlib.import_module(f"ctxstore.adapters.integrations.{m}")
        for m in SHORT_PATHS[short][0]
    ]
    for name in module.__all__:
        assert [getattr(old, name) for old in olds if hasattr(old, name)] == [getattr(module, name)]
    classes = {  # every integration class the old path defines is on the short one
        name for old in olds for name, obj in vars(old).items()
        if name.startswith("CtxStore") and getattr(obj, "__module__", None) == old.__name__
    }  # fmt: skip
    assert classes and classes <= set(module.__all__)


@pytest.mark.parametrize("short", sorted(SHORT_PATHS))
def test_a_short_path_loads_only_its_own_sdk(short):
    _, allowed = SHORT_PATHS[short]
    loaded = sdks_loaded_by(f"ctxstore.integrations.{short}")
    assert loaded and loaded <= allowed, loaded


def test_the_integrations_package_loads_no_sdk():
    assert sdks_loaded_by("ctxstore.integrations") == set()

"""The settings reference, generated from the ``Agent`` traitlets (``kernel/configurable.py``), as
IPython's documentation generates its own from its configurables:

    ```{ipyagent-settings}
    ```

Each setting becomes a rubric ``Agent.<name>`` with the anchor ``setting-<name>``, its type, its
default and its help string, in the order the class defines them. A setting without a help string
is a warning, so the ``-W`` build fails until it has one. The text is shown as written: no curly
quotes, and ``--cells`` stays two hyphens (Sphinx's smart quotes would make it an en dash).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import traitlets
from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

logger = logging.getLogger(__name__)
LONG_DEFAULT = 70  # characters: a longer (or multi-line) default is shown as a block of its own


@dataclass
class Setting:
    name: str
    anchor: str
    type: str
    default: str
    computed: bool  # the default is computed when the settings are created (a @default method)
    help: str


def _public_class(trait: traitlets.TraitType[Any, Any]) -> str:
    """The trait's type as traitlets names it: the first traitlets class of its MRO (ipyagent's own
    subclasses, such as the masked ``Dict`` of ``mcp_servers``, validate more but hold the same)."""
    return next(k.__name__ for k in type(trait).__mro__ if k.__module__.startswith("traitlets"))


def _type(trait: traitlets.TraitType[Any, Any]) -> str:
    if isinstance(trait, traitlets.Enum):
        choices = ", ".join(repr(value) for value in trait.values or [])
        caseless = " (any case)" if isinstance(trait, traitlets.CaselessStrEnum) else ""
        text = f"one of {choices}{caseless}"
    elif isinstance(trait, traitlets.List) and isinstance(trait._trait, traitlets.TraitType):
        text = f"List of {_public_class(trait._trait)}"  # traitlets keeps the item trait here only
    else:
        text = _public_class(trait)
    return text + (" or None" if trait.allow_none else "")


def _computed_defaults(cls: type[traitlets.HasTraits]) -> set[str]:
    """The traits whose default a ``@default`` method computes (traitlets' DefaultHandler)."""
    return {value.trait_name for value in vars(cls).values() if isinstance(value, traitlets.traitlets.DefaultHandler)}


def settings_reference() -> list[Setting]:
    """Every ``Agent`` setting, in the order the class defines them."""
    from ipyagent.kernel.configurable import SETTING_NAMES, AgentSettings

    traits = AgentSettings.class_traits(config=True)
    order = [name for name in vars(AgentSettings) if name in traits]
    order += [name for name in SETTING_NAMES if name not in order]  # inherited ones, if any
    computed = _computed_defaults(AgentSettings)
    return [Setting(name, f"setting-{name.replace('_', '-')}", _type(traits[name]), _default(traits[name]),
                    name in computed, " ".join((traits[name].help or "").split()))
            for name in order]


def _default(trait: traitlets.TraitType[Any, Any]) -> str:
    """The default as Python writes it; a long text (the system prompt) as itself, for a block."""
    value = trait.default_value
    if isinstance(value, str) and ("\n" in value or len(value) > LONG_DEFAULT):
        return value
    return trait.default_value_repr()


class SettingsDirective(SphinxDirective):
    has_content = False

    def run(self) -> list[nodes.Node]:
        out: list[nodes.Node] = []
        for setting in settings_reference():
            title = f"Agent.{setting.name}"
            out.append(nodes.rubric(title, "", nodes.literal(title, title), ids=[setting.anchor]))
            out += self._facts(setting)
            if not setting.help:
                logger.warning("Agent.%s has no help string (kernel/configurable.py)", setting.name,
                               location=self.get_location())
            else:
                out.append(nodes.paragraph(setting.help, setting.help, support_smartquotes=False))
        return out

    def _facts(self, setting: Setting) -> list[nodes.Node]:
        line = nodes.paragraph(support_smartquotes=False)
        line += nodes.strong("Type:", "Type:")
        line += nodes.Text(f" {setting.type}. ")
        line += nodes.strong("Default:", "Default:")
        if setting.computed:
            line += nodes.Text(" computed when the settings are created (the text below says how).")
            return [line]
        if "\n" in setting.default or len(setting.default) > LONG_DEFAULT:
            return [line, nodes.literal_block(setting.default, setting.default, language="text")]
        line += nodes.Text(" ")
        line += nodes.literal(setting.default, setting.default)
        return [line]


def setup(app: Sphinx) -> dict[str, object]:
    app.add_directive("ipyagent-settings", SettingsDirective)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

"""Pi's session JSON as TypedDicts: entries, the messages they hold, content blocks, usage; and the
notebook (nbformat 4) and kernel messages the session travels in.

Pi 1.6's fields (docs/session-format.md, docs/message-types.md; summarised in the design notes), plus the
few ipyagent adds. A TypedDict is a dict at run time, so reading and writing these shapes changes no
byte of a session file, and fields a newer Pi writes survive a round trip. Every shape is
``total=False``: input is checked where it is read (``session/entries.shape_problem``), not trusted
because of its type. The bottom layer, so session hooks can name the shapes too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict


class ContentBlock(TypedDict, total=False):
    """A block of a message's content: ``text``, ``thinking``, ``toolCall`` or ``image`` (Pi's fields)."""

    type: str
    text: str
    textSignature: str
    thinking: str
    thinkingSignature: str
    redacted: bool
    id: str
    name: str
    arguments: dict[str, Any]
    data: str
    mimeType: str
    # what a provider needs back on the next request (ipyagent's; Pi ignores them)
    rawArguments: str  # a tool call's arguments as received, when they were not valid JSON
    reasoningDetails: list[Any]  # OpenRouter's reasoning blocks
    extraContent: dict[str, object]  # Gemini's thought signature on an OpenAI-compatible tool call
    phase: str  # OpenAI Responses: a text's phase ("commentary", "final_answer")


class NestedCalls(TypedDict, total=False):
    """The calls a codemode script made inside one tool result (Pi 1.6's ``nestedCalls``)."""

    calls: list[object]  # each {id, name, arguments?, status…} as Pi wrote it: readers check each
    complete: bool


class UsageCost(TypedDict, total=False):
    """Dollars of a model's usage, per kind of token (Pi's ``usage.cost``)."""

    input: float
    output: float
    cacheRead: float
    cacheWrite: float
    total: float
    totalFromProvider: float


class Usage(TypedDict, total=False):
    """Tokens of one model call (Pi's ``usage``); ``totalTokens`` may be missing (Anthropic)."""

    input: int
    output: int
    cacheRead: int
    cacheWrite: int
    cacheWrite1h: int
    reasoning: int
    totalTokens: int
    cost: UsageCost
    costUnknown: bool  # ipyagent's: the model has no known price (a zero cost means "unknown")
    serverToolUse: dict[str, int]  # ipyagent's: Anthropic's count of the tools it ran itself


JsonSchema = TypedDict("JsonSchema", {
    "type": "str | list[str]",
    "description": str,
    "properties": "dict[str, JsonSchema]",
    "required": list[str],
    "items": "JsonSchema",
    "enum": list[Any],
    "default": Any,
    "minimum": float,
    "maximum": float,
    "additionalProperties": "bool | JsonSchema",
    "anyOf": "list[JsonSchema]",
    "$defs": "dict[str, JsonSchema]",
    "$ref": str,
}, total=False)
"""A JSON Schema as tools declare their parameters (the keywords ipyagent's own tools use and reads; an
MCP server's schema may hold others, which pass through untouched)."""


class ToolDeclaration(TypedDict, total=False):
    """A tool as a system message declares it (Pi 1.6's ``toolsAdded``; ``toolsRemoved`` holds names only)."""

    name: str
    description: str
    parameters: JsonSchema


class Message(TypedDict, total=False):
    """A Pi message of any role (``user``, ``assistant``, ``toolResult``, ``system``, ``bashExecution``,
    ``custom``, ``hookMessage``, ``branchSummary``, ``compactionSummary``): every field any role has.

    A TypedDict is a dict: fields it does not name (a newer Pi's) still survive a round trip."""

    role: str
    content: Any  # a string or a list of ContentBlock; checked where read (hostile input may hold anything)
    timestamp: int
    # assistant
    api: str
    provider: str
    model: str
    usage: Usage
    stopReason: str
    errorMessage: str
    responseId: str
    responseModel: str
    thinkingLevel: str
    providerThinkingLevel: str
    rawStopReason: str
    endTurn: bool
    deferred: bool
    diagnostics: list[Any]
    nestedCalls: NestedCalls  # toolResult (codemode)
    providerStopReason: str  # ipyagent's: the provider's own word for the ending
    providerContent: list[Mapping[str, object]]  # ipyagent's: the provider's own blocks, sent back as they came
    # toolResult
    toolCallId: str
    toolName: str
    details: dict[str, Any]
    isError: bool
    # custom, hookMessage
    customType: str
    display: bool
    # branchSummary, compactionSummary
    summary: str
    fromId: str | None
    tokensBefore: int
    # bashExecution
    command: str
    output: str
    exitCode: int | None
    cancelled: bool
    truncated: bool
    fullOutputPath: str
    excludeFromContext: bool
    # system (Pi 1.6)
    sections: dict[str, str | None]
    toolsAdded: list[ToolDeclaration]
    toolsRemoved: list[ToolDeclaration]
    # ipyagent's own (Pi ignores them)
    cellPrompt: str
    cellId: str  # the notebook cell whose run wrote the message
    executionCount: int

class SessionHeader(TypedDict, total=False):
    """The first line of a Pi session file."""

    type: str  # "session"
    version: int
    id: str
    timestamp: str
    cwd: str
    parentSession: str


class SummaryDetails(TypedDict, total=False):
    """A compaction's or branch summary's ``details`` as Pi writes them (the files read and changed in
    what was summarised), plus ipyagent's artifact ledger (``compaction/ledger.py``; Pi ignores it). A
    hook's own summary may hold anything here: readers check each value."""

    readFiles: list[str]
    modifiedFiles: list[str]
    artifacts: dict[str, Any]


class ContextEditReplacement(TypedDict):
    """What a ``context_edit`` puts in place of its target's content."""

    content: Any  # a string or a list of ContentBlock, as written


class Entry(TypedDict, total=False):
    """A Pi v3 session entry of any type (:data:`ENTRY_TYPES`): every field any type has.

    A TypedDict is a dict: fields it does not name (a newer Pi's, notebook facts) survive a round trip."""

    type: str
    id: str
    parentId: str | None
    timestamp: Any  # Pi writes an ISO string; older files a number (shape_problem accepts both)
    # message
    message: Message
    # compaction, branch_summary
    summary: str
    firstKeptEntryId: str
    tokensBefore: int
    details: Any  # SummaryDetails (compaction, branch_summary: a hook's may hold anything); custom_message: its own
    fromHook: bool
    usage: Usage
    systemMessage: Message
    fromId: str
    # custom, custom_message
    customType: str
    data: Any
    content: Any  # custom_message: a string or a list of ContentBlock
    display: bool
    # label, context_edit
    targetId: str
    label: str | None
    replacement: ContextEditReplacement | None
    # usage (Pi 1.6): model work that is no assistant message
    kind: str
    model: str
    note: str
    # thinking_level_change, model_change, session_info
    thinkingLevel: str
    provider: str
    modelId: str
    name: str
    # ipyagent's own (Pi ignores them): what made a compaction, the cell that wrote an entry
    trigger: str
    cellId: str


# ---- the notebook around the session (nbformat 4) -------------------------------------------------


class IpynbOutput(TypedDict, total=False):
    """An output of a code cell (nbformat 4): ``stream``, ``display_data``, ``execute_result`` or ``error``."""

    output_type: str
    name: str  # stream: "stdout" or "stderr"
    text: Any  # stream: a string, or a list of lines as nbformat splits it
    data: dict[str, object]  # a mime bundle: each value a string, a list of lines, or JSON (application/json)
    metadata: dict[str, object]
    execution_count: int | None
    ename: str
    evalue: str
    traceback: list[str]
    transient: dict[str, str]  # {"display_id": …}


class IpynbCell(TypedDict, total=False):
    """A cell of an nbformat 4 notebook (``outputs`` and ``execution_count``: code cells only)."""

    cell_type: str  # "code", "markdown" or "raw"
    id: str
    metadata: dict[str, Any]
    source: Any  # a string, or a list of lines as nbformat splits it
    outputs: list[IpynbOutput]
    execution_count: int | None
    attachments: dict[str, Any]


class Ipynb(TypedDict, total=False):
    """An nbformat 4 notebook as JSON; ``metadata["ipyagent"]`` holds the sessions (``store/``)."""

    cells: list[IpynbCell]
    metadata: dict[str, Any]
    nbformat: int
    nbformat_minor: int


class KernelMessageHeader(TypedDict, total=False):
    """A message's ``header`` (or ``parent_header``: empty when the message answers nothing)."""

    msg_id: str
    msg_type: str
    session: str
    username: str
    date: Any  # jupyter_client hands over a datetime; JSON carries an ISO string
    version: str
    subshell_id: str | None


class KernelMessage(TypedDict, total=False):
    """A Jupyter messaging protocol message as jupyter_client hands it over (a dict)."""

    header: KernelMessageHeader
    parent_header: KernelMessageHeader
    metadata: dict[str, Any]
    content: dict[str, Any]
    buffers: list[Any]
    msg_id: str
    msg_type: str
    channel: str

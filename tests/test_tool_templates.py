"""Real chat templates (as their models ship them) with tool conversations."""

# ruff: noqa: E501

from __future__ import annotations

import json

import pytest

from reame.chat_template import ChatTemplate
from reame.tool_calls.family import tool_family
from reame.tool_calls.prompt import tool_prompt

# Qwen/Qwen2.5-7B-Instruct
QWEN25 = (
    "{%- if tools %}\n"
    "    {{- '<|im_start|>system\\n' }}\n"
    "    {%- if messages[0]['role'] == 'system' %}\n"
    "        {{- messages[0]['content'] }}\n"
    "    {%- else %}\n"
    "        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}\n"
    "    {%- endif %}\n"
    '    {{- "\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>" }}\n'
    "    {%- for tool in tools %}\n"
    '        {{- "\\n" }}\n'
    "        {{- tool | tojson }}\n"
    "    {%- endfor %}\n"
    '    {{- "\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}\\n</tool_call><|im_end|>\\n" }}\n'
    "{%- else %}\n"
    "    {%- if messages[0]['role'] == 'system' %}\n"
    "        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}\n"
    "    {%- else %}\n"
    "        {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}\n"
    "    {%- endif %}\n"
    "{%- endif %}\n"
    "{%- for message in messages %}\n"
    '    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}\n'
    "        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}\n"
    '    {%- elif message.role == "assistant" %}\n'
    "        {{- '<|im_start|>' + message.role }}\n"
    "        {%- if message.content %}\n"
    "            {{- '\\n' + message.content }}\n"
    "        {%- endif %}\n"
    "        {%- for tool_call in message.tool_calls %}\n"
    "            {%- if tool_call.function is defined %}\n"
    "                {%- set tool_call = tool_call.function %}\n"
    "            {%- endif %}\n"
    '            {{- \'\\n<tool_call>\\n{"name": "\' }}\n'
    "            {{- tool_call.name }}\n"
    '            {{- \'", "arguments": \' }}\n'
    "            {{- tool_call.arguments | tojson }}\n"
    "            {{- '}\\n</tool_call>' }}\n"
    "        {%- endfor %}\n"
    "        {{- '<|im_end|>\\n' }}\n"
    '    {%- elif message.role == "tool" %}\n'
    '        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}\n'
    "            {{- '<|im_start|>user' }}\n"
    "        {%- endif %}\n"
    "        {{- '\\n<tool_response>\\n' }}\n"
    "        {{- message.content }}\n"
    "        {{- '\\n</tool_response>' }}\n"
    '        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}\n'
    "            {{- '<|im_end|>\\n' }}\n"
    "        {%- endif %}\n"
    "    {%- endif %}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n"
    "    {{- '<|im_start|>assistant\\n' }}\n"
    "{%- endif %}\n"
)

# meta-llama/Llama-3.2-3B-Instruct
LLAMA32 = (
    "{{- bos_token }}\n"
    "{%- if custom_tools is defined %}\n"
    "    {%- set tools = custom_tools %}\n"
    "{%- endif %}\n"
    "{%- if not tools_in_user_message is defined %}\n"
    "    {%- set tools_in_user_message = true %}\n"
    "{%- endif %}\n"
    "{%- if not date_string is defined %}\n"
    "    {%- if strftime_now is defined %}\n"
    '        {%- set date_string = strftime_now("%d %b %Y") %}\n'
    "    {%- else %}\n"
    '        {%- set date_string = "26 Jul 2024" %}\n'
    "    {%- endif %}\n"
    "{%- endif %}\n"
    "{%- if not tools is defined %}\n"
    "    {%- set tools = none %}\n"
    "{%- endif %}\n"
    "\n"
    "{#- This block extracts the system message, so we can slot it into the right place. #}\n"
    "{%- if messages[0]['role'] == 'system' %}\n"
    "    {%- set system_message = messages[0]['content']|trim %}\n"
    "    {%- set messages = messages[1:] %}\n"
    "{%- else %}\n"
    '    {%- set system_message = "" %}\n'
    "{%- endif %}\n"
    "\n"
    "{#- System message #}\n"
    '{{- "<|start_header_id|>system<|end_header_id|>\\n\\n" }}\n'
    "{%- if tools is not none %}\n"
    '    {{- "Environment: ipython\\n" }}\n'
    "{%- endif %}\n"
    '{{- "Cutting Knowledge Date: December 2023\\n" }}\n'
    '{{- "Today Date: " + date_string + "\\n\\n" }}\n'
    "{%- if tools is not none and not tools_in_user_message %}\n"
    '    {{- "You have access to the following functions. To call a function, please respond with JSON for a function call." }}\n'
    '    {{- \'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.\' }}\n'
    '    {{- "Do not use variables.\\n\\n" }}\n'
    "    {%- for t in tools %}\n"
    "        {{- t | tojson(indent=4) }}\n"
    '        {{- "\\n\\n" }}\n'
    "    {%- endfor %}\n"
    "{%- endif %}\n"
    "{{- system_message }}\n"
    '{{- "<|eot_id|>" }}\n'
    "\n"
    "{#- Custom tools are passed in a user message with some extra guidance #}\n"
    "{%- if tools_in_user_message and not tools is none %}\n"
    "    {#- Extract the first user message so we can plug it in here #}\n"
    "    {%- if messages | length != 0 %}\n"
    "        {%- set first_user_message = messages[0]['content']|trim %}\n"
    "        {%- set messages = messages[1:] %}\n"
    "    {%- else %}\n"
    '        {{- raise_exception("Cannot put tools in the first user message when there\'s no first user message!") }}\n'
    "{%- endif %}\n"
    "    {{- '<|start_header_id|>user<|end_header_id|>\\n\\n' -}}\n"
    '    {{- "Given the following functions, please respond with a JSON for a function call " }}\n'
    '    {{- "with its proper arguments that best answers the given prompt.\\n\\n" }}\n'
    '    {{- \'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.\' }}\n'
    '    {{- "Do not use variables.\\n\\n" }}\n'
    "    {%- for t in tools %}\n"
    "        {{- t | tojson(indent=4) }}\n"
    '        {{- "\\n\\n" }}\n'
    "    {%- endfor %}\n"
    '    {{- first_user_message + "<|eot_id|>"}}\n'
    "{%- endif %}\n"
    "\n"
    "{%- for message in messages %}\n"
    "    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}\n"
    "        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' }}\n"
    "    {%- elif 'tool_calls' in message %}\n"
    "        {%- if not message.tool_calls|length == 1 %}\n"
    '            {{- raise_exception("This model only supports single tool-calls at once!") }}\n'
    "        {%- endif %}\n"
    "        {%- set tool_call = message.tool_calls[0].function %}\n"
    "        {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}\n"
    "        {{- '{\"name\": \"' + tool_call.name + '\", ' }}\n"
    "        {{- '\"parameters\": ' }}\n"
    "        {{- tool_call.arguments | tojson }}\n"
    '        {{- "}" }}\n'
    '        {{- "<|eot_id|>" }}\n'
    '    {%- elif message.role == "tool" or message.role == "ipython" %}\n'
    '        {{- "<|start_header_id|>ipython<|end_header_id|>\\n\\n" }}\n'
    "        {%- if message.content is mapping or message.content is iterable %}\n"
    "            {{- message.content | tojson }}\n"
    "        {%- else %}\n"
    "            {{- message.content }}\n"
    "        {%- endif %}\n"
    '        {{- "<|eot_id|>" }}\n'
    "    {%- endif %}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n"
    "    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}\n"
    "{%- endif %}\n"
)

# mistralai/Mistral-Nemo-Instruct-2407
MISTRAL_NEMO = (
    '{%- if messages[0]["role"] == "system" %}\n'
    '    {%- set system_message = messages[0]["content"] %}\n'
    "    {%- set loop_messages = messages[1:] %}\n"
    "{%- else %}\n"
    "    {%- set loop_messages = messages %}\n"
    "{%- endif %}\n"
    "{%- if not tools is defined %}\n"
    "    {%- set tools = none %}\n"
    "{%- endif %}\n"
    '{%- set user_messages = loop_messages | selectattr("role", "equalto", "user") | list %}\n'
    "\n"
    "{#- This block checks for alternating user/assistant messages, skipping tool calling messages #}\n"
    "{%- set ns = namespace() %}\n"
    "{%- set ns.index = 0 %}\n"
    "{%- for message in loop_messages %}\n"
    '    {%- if not (message.role == "tool" or message.role == "tool_results" or (message.tool_calls is defined and message.tool_calls is not none)) %}\n'
    '        {%- if (message["role"] == "user") != (ns.index % 2 == 0) %}\n'
    '            {{- raise_exception("After the optional system message, conversation roles must alternate user/assistant/user/assistant/...") }}\n'
    "        {%- endif %}\n"
    "        {%- set ns.index = ns.index + 1 %}\n"
    "    {%- endif %}\n"
    "{%- endfor %}\n"
    "\n"
    "{{- bos_token }}\n"
    "{%- for message in loop_messages %}\n"
    '    {%- if message["role"] == "user" %}\n'
    "        {%- if tools is not none and (message == user_messages[-1]) %}\n"
    '            {{- "[AVAILABLE_TOOLS][" }}\n'
    "            {%- for tool in tools %}\n"
    "                {%- set tool = tool.function %}\n"
    '                {{- \'{"type": "function", "function": {\' }}\n'
    '                {%- for key, val in tool.items() if key != "return" %}\n'
    "                    {%- if val is string %}\n"
    "                        {{- '\"' + key + '\": \"' + val + '\"' }}\n"
    "                    {%- else %}\n"
    "                        {{- '\"' + key + '\": ' + val|tojson }}\n"
    "                    {%- endif %}\n"
    "                    {%- if not loop.last %}\n"
    '                        {{- ", " }}\n'
    "                    {%- endif %}\n"
    "                {%- endfor %}\n"
    '                {{- "}}" }}\n'
    "                {%- if not loop.last %}\n"
    '                    {{- ", " }}\n'
    "                {%- else %}\n"
    '                    {{- "]" }}\n'
    "                {%- endif %}\n"
    "            {%- endfor %}\n"
    '            {{- "[/AVAILABLE_TOOLS]" }}\n'
    "            {%- endif %}\n"
    "        {%- if loop.last and system_message is defined %}\n"
    '            {{- "[INST]" + system_message + "\\n\\n" + message["content"] + "[/INST]" }}\n'
    "        {%- else %}\n"
    '            {{- "[INST]" + message["content"] + "[/INST]" }}\n'
    "        {%- endif %}\n"
    "    {%- elif (message.tool_calls is defined and message.tool_calls is not none) %}\n"
    '        {{- "[TOOL_CALLS][" }}\n'
    "        {%- for tool_call in message.tool_calls %}\n"
    "            {%- set out = tool_call.function|tojson %}\n"
    "            {{- out[:-1] }}\n"
    "            {%- if not tool_call.id is defined or tool_call.id|length != 9 %}\n"
    '                {{- raise_exception("Tool call IDs should be alphanumeric strings with length 9!") }}\n'
    "            {%- endif %}\n"
    "            {{- ', \"id\": \"' + tool_call.id + '\"}' }}\n"
    "            {%- if not loop.last %}\n"
    '                {{- ", " }}\n'
    "            {%- else %}\n"
    '                {{- "]" + eos_token }}\n'
    "            {%- endif %}\n"
    "        {%- endfor %}\n"
    '    {%- elif message["role"] == "assistant" %}\n'
    '        {{- message["content"] + eos_token}}\n'
    '    {%- elif message["role"] == "tool_results" or message["role"] == "tool" %}\n'
    "        {%- if message.content is defined and message.content.content is defined %}\n"
    "            {%- set content = message.content.content %}\n"
    "        {%- else %}\n"
    "            {%- set content = message.content %}\n"
    "        {%- endif %}\n"
    '        {{- \'[TOOL_RESULTS]{"content": \' + content|string + ", " }}\n'
    "        {%- if not message.tool_call_id is defined or message.tool_call_id|length != 9 %}\n"
    '            {{- raise_exception("Tool call IDs should be alphanumeric strings with length 9!") }}\n'
    "        {%- endif %}\n"
    "        {{- '\"call_id\": \"' + message.tool_call_id + '\"}[/TOOL_RESULTS]' }}\n"
    "    {%- else %}\n"
    '        {{- raise_exception("Only user and assistant roles are supported, with the exception of an initial optional system message!") }}\n'
    "    {%- endif %}\n"
    "{%- endfor %}\n"
)

# HuggingFaceTB/SmolLM2-135M-Instruct
SMOLLM2 = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\n"
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
    "' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n"
    "' + message['content'] + '<|im_end|>' + '\n"
    "'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n"
    "' }}{% endif %}"
)

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]
CONVERSATION = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather in Rome?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_0123456789abcdef01234567",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_0123456789abcdef01234567", "content": "22C, sunny"},
]


@pytest.mark.parametrize(
    ("source", "family"),
    [(QWEN25, "hermes"), (LLAMA32, "llama3"), (MISTRAL_NEMO, "mistral"), (SMOLLM2, "generic")],
)
def test_each_template_is_told_apart_by_its_markers(source: str, family: str) -> None:
    assert tool_family(source) == family


def test_no_template_is_generic() -> None:
    assert tool_family(None) == "generic"
    assert tool_family("") == "generic"


def test_a_llama_template_without_python_tag_is_llama3_by_its_ipython_turn() -> None:
    assert "<|python_tag|>" not in LLAMA32
    assert tool_family(LLAMA32) == "llama3"


def _render(source: str, tool_choice: object = "auto") -> str:
    prompt = tool_prompt(CONVERSATION, TOOLS, tool_choice, tool_family(source))
    template = ChatTemplate(source, bos_token="<s>", eos_token="</s>")
    return template.render(prompt.messages, tools=prompt.tools)


def test_qwen_renders_the_tools_the_call_and_its_result() -> None:
    out = _render(QWEN25)
    assert json.dumps(TOOLS[0]) in out  # Hugging Face's tojson: plain json.dumps
    assert (
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome"}}\n</tool_call>' in out
    )
    assert "<|im_start|>user\n<tool_response>\n22C, sunny\n</tool_response><|im_end|>" in out
    assert out.endswith("<|im_start|>assistant\n")


def test_llama_renders_the_call_as_json_with_parameters() -> None:
    out = _render(LLAMA32)
    assert '"parameters": {"city": "Rome"}}<|eot_id|>' in out
    assert '<|start_header_id|>ipython<|end_header_id|>\n\n"22C, sunny"<|eot_id|>' in out
    assert "Environment: ipython" in out


def test_mistral_gets_call_ids_of_nine_characters_the_same_in_call_and_result() -> None:
    out = _render(MISTRAL_NEMO)
    call = out.split("[TOOL_CALLS]")[1].split("</s>")[0]
    call_id = json.loads(call)[0]["id"]
    assert len(call_id) == 9 and call_id.isalnum()
    assert f'"call_id": "{call_id}"}}[/TOOL_RESULTS]' in out
    assert "[AVAILABLE_TOOLS]" in out


def test_smollm2_gets_the_tools_and_the_format_in_its_system_message() -> None:
    out = _render(SMOLLM2)
    assert out.startswith("<|im_start|>system\nBe brief.\n\nRespond in JSON format")
    assert '{"tool_calls":[{"name":"get_weather","arguments":{"city":"Rome"}}]}' in out
    assert '<|im_start|>user\n{"tool_response":{"tool":"get_weather","content":"22C, sunny"' in out


@pytest.mark.parametrize("source", [QWEN25, LLAMA32, MISTRAL_NEMO])
def test_tool_choice_none_gives_the_template_no_tools(source: str) -> None:
    out = _render(source, "none")
    assert "get_weather" not in out.split("Weather in Rome?")[0]


def test_smollm2_with_tool_choice_none_is_told_nothing_of_tools() -> None:
    assert "Respond in JSON format" not in _render(SMOLLM2, "none")

"""A note-keeping agent program for nodeval's command-agent tests: the `anthropic` SDK.

One user turn per stdin line, one answer line per turn on stdout. The model may call the tool
`save_note`, which appends the note to notes.txt in the working directory. The SDK reads
ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY itself; SYSTEM_PROMPT sets the system prompt.
An HTTP error status prints the body on stderr and exits 1. It knows nothing of nodeval.
"""

import os
import sys

import anthropic

MODEL = "claude-sonnet-4-6"
SAVE_NOTE = {
    "name": "save_note",
    "description": "Save a note for the user.",
    "input_schema": {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    },
}


def run_tool(name: str, args: dict) -> str:
    if name != "save_note":
        return f"unknown tool {name}"
    with open("notes.txt", "a", encoding="utf-8") as notes:
        notes.write(args["text"] + "\n")
    return f"saved {args['text']}"


def main() -> int:
    client = anthropic.Anthropic()
    system = os.environ.get("SYSTEM_PROMPT", "You keep the user's notes.")
    messages: list = []
    for line in sys.stdin:
        messages.append({"role": "user", "content": line.rstrip("\n")})
        while True:
            try:
                reply = client.messages.create(
                    model=MODEL,
                    max_tokens=256,
                    system=system,
                    tools=[SAVE_NOTE],
                    messages=messages,
                )
            except anthropic.APIStatusError as err:
                print(err.response.text, file=sys.stderr)
                return 1
            messages.append({"role": "assistant", "content": reply.content})
            calls = [block for block in reply.content if block.type == "tool_use"]
            if not calls:
                break
            results = [
                {"type": "tool_result", "tool_use_id": c.id, "content": run_tool(c.name, c.input)}
                for c in calls
            ]
            messages.append({"role": "user", "content": results})
        text = " ".join(block.text for block in reply.content if block.type == "text")
        print(text.replace("\n", " "), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

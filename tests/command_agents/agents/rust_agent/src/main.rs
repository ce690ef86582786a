//! A note-keeping agent program for nodeval's command-agent tests: ureq + Anthropic Messages.
//!
//! One user turn per stdin line, one answer line per turn on stdout. The model may call the
//! tool `save_note`, which appends the note to notes.txt in the working directory. Reads
//! ANTHROPIC_BASE_URL (no /v1), ANTHROPIC_API_KEY and SYSTEM_PROMPT. An HTTP error status
//! prints the body on stderr and exits 1. It knows nothing of nodeval.

use serde_json::{Value, json};
use std::io::{BufRead, Write};
use std::{env, fs, io, process};

fn run_tool(name: &str, input: &Value) -> String {
    if name != "save_note" {
        return format!("unknown tool {name}");
    }
    let text = input["text"].as_str().unwrap_or_default();
    let options = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open("notes.txt");
    let mut notes = options.expect("cannot open notes.txt");
    writeln!(notes, "{text}").expect("cannot write notes.txt");
    format!("saved {text}")
}

fn main() {
    let base = env::var("ANTHROPIC_BASE_URL").expect("ANTHROPIC_BASE_URL");
    let url = format!("{}/v1/messages", base.trim_end_matches('/'));
    let key = env::var("ANTHROPIC_API_KEY").expect("ANTHROPIC_API_KEY");
    let system = env::var("SYSTEM_PROMPT").unwrap_or("You keep the user's notes.".into());
    let tool = json!({
        "name": "save_note",
        "description": "Save a note for the user.",
        "input_schema": {"type": "object", "properties": {"text": {"type": "string"}},
                         "required": ["text"]},
    });
    // Error statuses come back as responses, so their body can be printed.
    let config = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build();
    let agent = ureq::Agent::new_with_config(config);
    let mut messages: Vec<Value> = Vec::new();
    for line in io::stdin().lock().lines() {
        messages.push(json!({"role": "user", "content": line.expect("cannot read stdin")}));
        loop {
            let body = json!({"model": "claude-sonnet-4-6", "max_tokens": 256, "system": system,
                              "tools": [tool], "messages": messages});
            let mut response = agent
                .post(&url)
                .header("x-api-key", &key)
                .header("anthropic-version", "2023-06-01")
                .send_json(&body)
                .unwrap_or_else(|err| panic!("request to {url} failed: {err}"));
            let text = response
                .body_mut()
                .read_to_string()
                .expect("cannot read the response");
            if response.status().as_u16() >= 400 {
                eprintln!("{text}");
                process::exit(1);
            }
            let reply: Value = serde_json::from_str(&text).expect("the response is not JSON");
            let content = reply["content"].as_array().cloned().unwrap_or_default();
            messages.push(json!({"role": "assistant", "content": content}));
            let results: Vec<Value> = content
                .iter()
                .filter(|block| block["type"] == "tool_use")
                .map(|call| {
                    let result =
                        run_tool(call["name"].as_str().unwrap_or_default(), &call["input"]);
                    json!({"type": "tool_result", "tool_use_id": call["id"], "content": result})
                })
                .collect();
            if results.is_empty() {
                let texts: Vec<&str> = content.iter().filter_map(|b| b["text"].as_str()).collect();
                println!("{}", texts.join(" ").replace('\n', " "));
                io::stdout().flush().expect("cannot write stdout");
                break;
            }
            messages.push(json!({"role": "user", "content": results}));
        }
    }
}

//! The conversation runtime from the command line: `cairn conversations …` and `cairn chat`,
//! an interactive conversation that streams each reply as it is written and asks open
//! widget prompts as questions.

use std::io::{BufRead, Write};
use std::process::ExitCode;

use cairn_client::Client;
use cairn_client::types::runtime::{
    CreateConversationInput, EventsQuery, ListConversationsInput, OpenPrompt, ReplayResult,
    SendMessageBody, SubmitWidgetBody,
};
use cairn_client::types::{Conversation, RuntimeEvent};
use serde_json::{Map, Value, json};

use crate::client::{ClientArgs, Paint, print_json};
use crate::memories::Output;

#[derive(Debug, clap::Subcommand)]
pub(crate) enum ConversationsCommand {
    /// Lists conversations, newest first.
    List {
        #[arg(long)]
        agent: Option<String>,
        #[arg(long)]
        limit: Option<u32>,
        #[command(flatten)]
        output: Output,
    },
    /// Starts a conversation.
    Create {
        /// The agent that answers [default: the daemon's first].
        #[arg(long)]
        agent: Option<String>,
        #[command(flatten)]
        output: Output,
    },
    /// Shows a conversation's messages and open prompts.
    Show {
        id: String,
        #[command(flatten)]
        output: Output,
    },
    /// Prints a conversation's events; `--follow` keeps printing new ones.
    Events {
        id: String,
        /// Only events after this offset.
        #[arg(long)]
        after: Option<u64>,
        #[arg(long)]
        follow: bool,
        #[command(flatten)]
        output: Output,
    },
    /// Closes a conversation.
    Close {
        id: String,
        #[arg(long)]
        reason: Option<String>,
        #[command(flatten)]
        output: Output,
    },
}

pub(crate) async fn conversations(command: ConversationsCommand) -> anyhow::Result<ExitCode> {
    let paint = Paint::stdout();
    match command {
        ConversationsCommand::List { agent, limit, output } => {
            let input = ListConversationsInput { agent_id: agent, limit, ..Default::default() };
            let list = output.client.connect()?.list_conversations(&input).await?;
            if output.json {
                print_json(&list)?;
            } else {
                if list.conversations.is_empty() {
                    println!("{}", paint.dim("no conversations"));
                }
                for conversation in &list.conversations {
                    print_conversation(&paint, conversation);
                }
            }
        }
        ConversationsCommand::Create { agent, output } => {
            let input = CreateConversationInput { agent_id: agent, ..Default::default() };
            let conversation = output.client.connect()?.create_conversation(&input).await?;
            if output.json {
                print_json(&conversation)?;
            } else {
                println!("{}", conversation.id);
            }
        }
        ConversationsCommand::Show { id, output } => {
            let replay = replay_all(&output.client.connect()?, &id).await?;
            if output.json {
                print_json(&replay)?;
                return Ok(ExitCode::SUCCESS);
            }
            print_conversation(&paint, &replay.conversation);
            for message in &replay.messages {
                let who = if message.role == "user" { "you" } else { message.role.as_str() };
                println!("{} {}", paint.bold(&format!("{who}:")), message.text);
            }
            for prompt in &replay.open_prompts {
                println!(
                    "{}",
                    paint
                        .dim(&format!("open prompt {} ({})", prompt.prompt_id, prompt.widget_kind))
                );
            }
        }
        ConversationsCommand::Events { id, after, follow, output } => {
            let client = output.client.connect()?;
            let print = |event: &RuntimeEvent| -> anyhow::Result<()> {
                if output.json {
                    println!("{}", serde_json::to_string(event)?);
                } else {
                    println!(
                        "{:>4}  {}  {}",
                        event.offset,
                        paint.bold(&event.kind),
                        paint.dim(&event.data.to_string())
                    );
                }
                Ok(())
            };
            if follow {
                let mut stream = client.stream_events(&id, after);
                while let Some(event) = stream.next().await {
                    print(&event?)?;
                }
            } else {
                for event in client.list_events(&id, after).await? {
                    print(&event)?;
                }
            }
        }
        ConversationsCommand::Close { id, reason, output } => {
            let conversation = output.client.connect()?.close_conversation(&id, reason).await?;
            if output.json {
                print_json(&conversation)?;
            } else {
                println!("{id} closed");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The whole replay of a conversation, its pages joined: every event and message, the
/// prompts open and the conversation and snapshot as the last page found them.
async fn replay_all(client: &Client, id: &str) -> anyhow::Result<ReplayResult> {
    let mut query = EventsQuery::default();
    let mut replay = client.replay_conversation(id, &query).await?;
    while let Some(next) = replay.next_after_offset {
        query.after_offset = Some(next);
        let page = client.replay_conversation(id, &query).await?;
        replay.events.extend(page.events);
        replay.messages.extend(page.messages);
        replay.conversation = page.conversation;
        replay.snapshot = page.snapshot;
        replay.next_after_offset = page.next_after_offset;
    }
    Ok(replay)
}

fn print_conversation(paint: &Paint, conversation: &Conversation) {
    let facts = format!(
        "{} · {} · updated {}",
        conversation.agent_id,
        conversation.lifecycle.as_str(),
        conversation.updated_at
    );
    println!("{}  {}", paint.bold(&conversation.id), paint.dim(&facts));
}

#[derive(Debug, clap::Args)]
pub(crate) struct ChatArgs {
    /// Continue this conversation instead of starting one.
    #[arg(long)]
    conversation: Option<String>,
    /// The agent to talk to [default: the daemon's first].
    #[arg(long)]
    agent: Option<String>,
    #[command(flatten)]
    client: ClientArgs,
}

/// Reads messages from standard input, one a line, until end of input or `/quit`.
pub(crate) async fn chat(args: ChatArgs) -> anyhow::Result<ExitCode> {
    let client = args.client.connect()?;
    let paint = Paint::stdout();
    let conversation_id = match args.conversation {
        Some(id) => id,
        None => {
            let input = CreateConversationInput { agent_id: args.agent, ..Default::default() };
            client.create_conversation(&input).await?.id
        }
    };
    println!("{}", paint.dim(&format!("conversation {conversation_id} · /quit to leave")));
    let mut lines = std::io::stdin().lock().lines();
    loop {
        // Open prompts come first: the agent is waiting for them. Every page of a replay
        // carries them, so the smallest page will do.
        let query = EventsQuery { after_offset: None, limit: Some(1) };
        let replay = client.replay_conversation(&conversation_id, &query).await?;
        if let Some(prompt) = replay.open_prompts.first() {
            let Some(output) = ask(&paint, prompt, &mut lines)? else { break };
            let widget = SubmitWidgetBody {
                prompt_id: prompt.prompt_id.clone(),
                widget_kind: prompt.widget_kind.clone(),
                output,
            };
            client.submit_widget(&conversation_id, &widget).await?;
            print_reply_since(&client, &paint, &conversation_id, prompt.offset).await?;
            continue;
        }
        print!("{} ", paint.bold("you:"));
        std::io::stdout().flush()?;
        let Some(line) = lines.next().transpose()? else { break };
        let line = line.trim();
        if line == "/quit" {
            break;
        }
        if line.is_empty() {
            continue;
        }
        let message = SendMessageBody { message: line.to_owned(), ..Default::default() };
        print!("{} ", paint.bold("agent:"));
        std::io::stdout().flush()?;
        let mut printed = false;
        client
            .send_message_streaming(&conversation_id, &message, |delta| {
                printed = true;
                print!("{delta}");
                let _ = std::io::stdout().flush();
            })
            .await?;
        if printed {
            println!();
        } else {
            println!("{}", paint.dim("(no reply)"));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Asks a widget prompt as questions: a form's fields one by one, a choice among options,
/// or one value. `None` at end of input.
fn ask(
    paint: &Paint,
    prompt: &OpenPrompt,
    lines: &mut impl Iterator<Item = std::io::Result<String>>,
) -> anyhow::Result<Option<Value>> {
    let mut read = |question: &str| -> anyhow::Result<Option<String>> {
        print!("{} ", paint.bold(question));
        std::io::stdout().flush()?;
        Ok(lines.next().transpose()?.map(|line| line.trim().to_owned()))
    };
    let fields: Vec<String> = prompt.input["fields"]
        .as_array()
        .map(|fields| {
            fields
                .iter()
                .filter_map(|field| field.as_str().or_else(|| field["name"].as_str()))
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    if !fields.is_empty() {
        let mut output = Map::new();
        for field in fields {
            let Some(answer) = read(&format!("{field}:"))? else { return Ok(None) };
            output.insert(field, Value::String(answer));
        }
        return Ok(Some(Value::Object(output)));
    }
    let question = match prompt.input["options"].as_array() {
        Some(options) => {
            let options: Vec<String> = options
                .iter()
                .map(|option| option.as_str().map_or_else(|| option.to_string(), str::to_owned))
                .collect();
            format!("{} [{}]:", prompt.widget_kind, options.join("/"))
        }
        None => format!("{}:", prompt.input["label"].as_str().unwrap_or(&prompt.widget_kind)),
    };
    let Some(answer) = read(&question)? else { return Ok(None) };
    // A number stays a number (a rating of 4 is 4, not "4").
    let value = match (answer.parse::<i64>(), answer.parse::<f64>()) {
        (Ok(integer), _) => json!(integer),
        (_, Ok(number)) => json!(number),
        _ => Value::String(answer),
    };
    Ok(Some(json!({ "value": value })))
}

/// Prints the assistant's messages appended after `offset`.
async fn print_reply_since(
    client: &Client,
    paint: &Paint,
    conversation_id: &str,
    offset: u64,
) -> anyhow::Result<()> {
    for event in client.list_events(conversation_id, Some(offset)).await? {
        if event.kind == "message" && event.data["role"] == "assistant" {
            println!(
                "{} {}",
                paint.bold("agent:"),
                event.data["text"].as_str().unwrap_or_default()
            );
        }
    }
    Ok(())
}

//! The fixtures the official MCP conformance suite's server scenarios call by name
//! (`test_simple_text`, `test://static-text`, `test_simple_prompt`, ...), as a catalog.
//! Served only when a test asks for it (see the host's `CONDUIT_MCP_CONFORMANCE`),
//! never in a normal run.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use base64::Engine;
use conduit_core::content::{MediaRef, ResultPart};
use conduit_core::media::MediaStore;
use conduit_core::tool::{Progress, Tool, ToolContext, ToolError, ToolOutput, ToolSpec};
use futures::future::BoxFuture;
use serde_json::{Value, json};

use sha2::{Digest, Sha256};
use tokio::sync::broadcast;

use crate::server::{
    Catalog, CatalogChange, CatalogError, PromptArgumentInfo, PromptBody, PromptContent,
    PromptInfo, PromptRole, RawRequest, ResourceBody, ResourceData, ResourceInfo,
    ResourceTemplateInfo, current_caller, log,
};

/// A 1x1 red PNG, as the suite's reference server sends it.
const TEST_IMAGE: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A minimal WAV file.
const TEST_AUDIO: &str = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=";

type Run = Arc<
    dyn Fn(Value, ToolContext) -> BoxFuture<'static, Result<ToolOutput, ToolError>> + Send + Sync,
>;

struct Fixture {
    spec: ToolSpec,
    run: Run,
}

#[async_trait]
impl Tool for Fixture {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, arguments: Value, context: ToolContext) -> Result<ToolOutput, ToolError> {
        (self.run)(arguments, context).await
    }
}

fn fixture(name: &str, description: &str, input_schema: Value, run: Run) -> Arc<dyn Tool> {
    Arc::new(Fixture {
        spec: ToolSpec {
            name: name.into(),
            title: None,
            description: description.into(),
            input_schema,
            output_schema: None,
            annotations: Default::default(),
        },
        run,
    })
}

fn empty_schema() -> Value {
    json!({"type": "object", "properties": {}})
}

fn decode(base64: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(base64)
        .unwrap_or_default()
}

fn parts(parts: Vec<ResultPart>) -> ToolOutput {
    ToolOutput {
        parts,
        is_error: false,
    }
}

fn text(text: &str) -> ResultPart {
    ResultPart::Text { text: text.into() }
}

fn done(output: ToolOutput) -> BoxFuture<'static, Result<ToolOutput, ToolError>> {
    Box::pin(std::future::ready(Ok(output)))
}

/// The suite's fixtures.
pub struct ConformanceCatalog {
    tools: Vec<Arc<dyn Tool>>,
    changes: broadcast::Sender<CatalogChange>,
    /// Signs `requestState` so a tampered one is refused.
    key: [u8; 32],
}

/// Multi-round tools answered in MCP's terms (see [`Catalog::answer_raw`]).
const RAW_TOOLS: [&str; 9] = [
    "test_input_required_result_elicitation",
    "test_input_required_result_sampling",
    "test_input_required_result_list_roots",
    "test_input_required_result_request_state",
    "test_input_required_result_multiple_inputs",
    "test_input_required_result_multi_round",
    "test_input_required_result_tampered_state",
    "test_input_required_result_capabilities",
    "test_streaming_elicitation",
];

fn random_key() -> [u8; 32] {
    use std::hash::{BuildHasher, Hasher};
    let mut key = [0u8; 32];
    for (index, chunk) in key.chunks_mut(8).enumerate() {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_usize(index);
        chunk.copy_from_slice(&hasher.finish().to_le_bytes());
    }
    key
}

fn elicit(message: &str, field: &str, kind: &str) -> Value {
    json!({"method": "elicitation/create", "params": {
        "message": message,
        "requestedSchema": {"type": "object", "properties": {field: {"type": kind}}, "required": [field]}
    }})
}

fn sample(text: &str, max_tokens: u32) -> Value {
    json!({"method": "sampling/createMessage", "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
        "maxTokens": max_tokens
    }})
}

fn roots() -> Value {
    json!({"method": "roots/list", "params": {}})
}

fn input_required(requests: Value, state: Option<String>) -> Value {
    let mut result = json!({"resultType": "input_required", "inputRequests": requests});
    if let Some(state) = state {
        result["requestState"] = json!(state);
    }
    result
}

fn complete_text(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": false})
}

impl ConformanceCatalog {
    /// The fixtures; their image and audio are stored in `media` (results carry media).
    pub fn new(media: &dyn MediaStore) -> Result<Self, CatalogError> {
        let (changes, _) = broadcast::channel(16);
        let store = |base64: &str, mime: &str| -> Result<MediaRef, CatalogError> {
            media
                .put(&decode(base64), Some(mime))
                .map_err(|e| CatalogError::Failed(e.to_string()))
        };
        let image = store(TEST_IMAGE, "image/png")?;
        let audio = store(TEST_AUDIO, "audio/wav")?;
        let tools = vec![
            fixture(
                "test_simple_text",
                "Tests simple text content response",
                empty_schema(),
                Arc::new(|_, _| {
                    done(parts(vec![text(
                        "This is a simple text response for testing.",
                    )]))
                }),
            ),
            {
                let image = image.clone();
                fixture(
                    "test_image_content",
                    "Tests image content response",
                    empty_schema(),
                    Arc::new(move |_, _| {
                        done(parts(vec![ResultPart::Image {
                            media: image.clone(),
                        }]))
                    }),
                )
            },
            fixture(
                "test_audio_content",
                "Tests audio content response",
                empty_schema(),
                Arc::new(move |_, _| {
                    done(parts(vec![ResultPart::Audio {
                        media: audio.clone(),
                    }]))
                }),
            ),
            fixture(
                "test_embedded_resource",
                "Tests embedded resource content response",
                empty_schema(),
                Arc::new(|_, _| {
                    done(parts(vec![ResultPart::Resource {
                        uri: "test://embedded-resource".into(),
                        mime: Some("text/plain".into()),
                        text: Some("This is an embedded resource content.".into()),
                        media: None,
                    }]))
                }),
            ),
            fixture(
                "test_multiple_content_types",
                "Tests response with multiple content types (text, image, resource)",
                empty_schema(),
                Arc::new(move |_, _| {
                    done(parts(vec![
                        text("Multiple content types test:"),
                        ResultPart::Image {
                            media: image.clone(),
                        },
                        ResultPart::Resource {
                            uri: "test://mixed-content-resource".into(),
                            mime: Some("application/json".into()),
                            text: Some(json!({"test": "data", "value": 123}).to_string()),
                            media: None,
                        },
                    ]))
                }),
            ),
            fixture(
                "test_tool_with_logging",
                "Tests tool that emits log messages during execution",
                empty_schema(),
                Arc::new(|_, _| Box::pin(with_logging())),
            ),
            fixture(
                "test_logging_tool",
                "Logs three messages, to clients that asked for them",
                empty_schema(),
                Arc::new(|_, _| Box::pin(with_logging())),
            ),
            fixture(
                "test_missing_capability",
                "Needs the client's sampling capability",
                empty_schema(),
                Arc::new(|_, _| done(parts(vec![text("the client can sample")]))),
            ),
            {
                let changes = changes.clone();
                fixture(
                    "test_trigger_tool_change",
                    "Says the tool list changed",
                    empty_schema(),
                    Arc::new(move |_, _| {
                        let _ = changes.send(CatalogChange::Tools);
                        done(parts(vec![text("tools changed")]))
                    }),
                )
            },
            {
                let changes = changes.clone();
                fixture(
                    "test_trigger_prompt_change",
                    "Says the prompt list changed",
                    empty_schema(),
                    Arc::new(move |_, _| {
                        let _ = changes.send(CatalogChange::Prompts);
                        done(parts(vec![text("prompts changed")]))
                    }),
                )
            },
            fixture(
                "test_tool_with_progress",
                "Tests tool that reports progress notifications",
                empty_schema(),
                Arc::new(|_, context: ToolContext| {
                    for step in [0.0, 50.0, 100.0] {
                        (context.progress)(Progress {
                            progress: step,
                            total: Some(100.0),
                            message: Some(format!("Completed step {step} of 100")),
                        });
                    }
                    done(parts(vec![text("Progress reported")]))
                }),
            ),
            fixture(
                "test_error_handling",
                "Tests error response handling",
                empty_schema(),
                Arc::new(|_, _| {
                    Box::pin(std::future::ready(Err(ToolError(
                        "This tool intentionally returns an error for testing".into(),
                    ))))
                }),
            ),
            fixture(
                "test_sampling",
                "Tests server-initiated sampling (LLM completion request)",
                json!({"type": "object", "properties": {"prompt": {"type": "string"}}, "required": ["prompt"]}),
                Arc::new(|arguments, _| Box::pin(sampling(arguments))),
            ),
            fixture(
                "test_elicitation",
                "Tests server-initiated elicitation (user input request)",
                json!({"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}),
                Arc::new(|arguments: Value, _| {
                    let message = arguments["message"].as_str().unwrap_or_default().to_owned();
                    Box::pin(elicitation(
                        json!({
                            "mode": "form",
                            "message": message,
                            "requestedSchema": {
                                "type": "object",
                                "properties": {"response": {"type": "string", "description": "User's response"}},
                                "required": ["response"]
                            }
                        }),
                        "User response",
                    ))
                }),
            ),
            fixture(
                "test_elicitation_sep1034_defaults",
                "Tests elicitation with default values per SEP-1034",
                empty_schema(),
                Arc::new(|_, _| {
                    Box::pin(elicitation(
                        json!({
                            "mode": "form",
                            "message": "Please review and update the form fields with defaults",
                            "requestedSchema": {
                                "type": "object",
                                "properties": {
                                    "name": {"type": "string", "description": "User name", "default": "John Doe"},
                                    "age": {"type": "integer", "description": "User age", "default": 30},
                                    "score": {"type": "number", "description": "User score", "default": 95.5},
                                    "status": {"type": "string", "description": "User status", "enum": ["active", "inactive", "pending"], "default": "active"},
                                    "verified": {"type": "boolean", "description": "Verification status", "default": true}
                                },
                                "required": []
                            }
                        }),
                        "Elicitation completed",
                    ))
                }),
            ),
            fixture(
                "test_elicitation_sep1330_enums",
                "Tests elicitation with enum schema improvements per SEP-1330",
                empty_schema(),
                Arc::new(|_, _| {
                    Box::pin(elicitation(
                        json!({
                            "mode": "form",
                            "message": "Please select options from the enum fields",
                            "requestedSchema": {
                                "type": "object",
                                "properties": {
                                    "untitledSingle": {"type": "string", "description": "Select one option", "enum": ["option1", "option2", "option3"]},
                                    "titledSingle": {"type": "string", "description": "Select one option with titles", "oneOf": [
                                        {"const": "value1", "title": "First Option"},
                                        {"const": "value2", "title": "Second Option"},
                                        {"const": "value3", "title": "Third Option"}
                                    ]},
                                    "legacyEnum": {"type": "string", "description": "Select one option (legacy)", "enum": ["opt1", "opt2", "opt3"], "enumNames": ["Option One", "Option Two", "Option Three"]},
                                    "untitledMulti": {"type": "array", "description": "Select multiple options", "minItems": 1, "maxItems": 3, "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
                                    "titledMulti": {"type": "array", "description": "Select multiple options with titles", "minItems": 1, "maxItems": 3, "items": {"anyOf": [
                                        {"const": "value1", "title": "First Choice"},
                                        {"const": "value2", "title": "Second Choice"},
                                        {"const": "value3", "title": "Third Choice"}
                                    ]}}
                                },
                                "required": []
                            }
                        }),
                        "Elicitation completed",
                    ))
                }),
            ),
            fixture(
                "test_custom_headers",
                "Mirrors its region argument into the Mcp-Param-Region header (SEP-2243)",
                json!({
                    "type": "object",
                    "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
                    "required": ["region"]
                }),
                Arc::new(|arguments: Value, _| {
                    done(parts(vec![text(&format!(
                        "region: {}",
                        arguments["region"].as_str().unwrap_or_default()
                    ))]))
                }),
            ),
            fixture(
                "json_schema_2020_12_tool",
                "Tool with JSON Schema 2020-12 features for conformance testing (SEP-1613)",
                json!({
                    "$schema": "https://json-schema.org/draft/2020-12/schema",
                    "type": "object",
                    "$defs": {"address": {
                        "$anchor": "addressDef",
                        "type": "object",
                        "properties": {"street": {"type": "string"}, "city": {"type": "string"}}
                    }},
                    "properties": {
                        "name": {"type": "string"},
                        "address": {"$ref": "#/$defs/address"},
                        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
                        "phone": {"type": "string"},
                        "email": {"type": "string"}
                    },
                    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
                    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
                    "then": {"required": ["phone"]},
                    "else": {"required": ["email"]},
                    "additionalProperties": false
                }),
                Arc::new(|arguments: Value, _| {
                    done(parts(vec![text(&format!(
                        "JSON Schema 2020-12 tool called with: {arguments}"
                    ))]))
                }),
            ),
        ];
        let mut tools = tools;
        for name in RAW_TOOLS {
            // Listed like any tool; answered by `answer_raw`.
            tools.push(fixture(
                name,
                "Asks the client for input first (multi-round, 2026-07-28)",
                empty_schema(),
                Arc::new(|_, _| {
                    Box::pin(std::future::ready(Err(ToolError(
                        "answered in MCP terms".into(),
                    ))))
                }),
            ));
        }
        Ok(Self {
            tools,
            changes,
            key: random_key(),
        })
    }

    fn sign(&self, payload: &str) -> String {
        let mut hash = Sha256::new();
        hash.update(self.key);
        hash.update(payload.as_bytes());
        hash.update(self.key);
        let digest: String = hash
            .finalize()
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect();
        format!("{payload}.{digest}")
    }

    /// The payload of a state this catalog signed; an error for anything else.
    fn verify(&self, state: &str) -> Result<String, CatalogError> {
        let payload = state.rsplit_once('.').map(|(payload, _)| payload);
        match payload {
            Some(payload) if self.sign(payload) == state => Ok(payload.to_owned()),
            _ => Err(CatalogError::InvalidArguments(
                "requestState failed its integrity check".into(),
            )),
        }
    }

    fn tool_answer(&self, name: &str, request: &RawRequest) -> Result<Value, CatalogError> {
        let responses = request
            .params
            .get("inputResponses")
            .filter(|r| r.is_object());
        let response = |key: &str| responses.and_then(|r| r.get(key));
        let state = request.params.get("requestState").and_then(Value::as_str);
        let answered = |key: &str| response(key).is_some();
        Ok(match name {
            "test_input_required_result_elicitation" | "test_streaming_elicitation" => {
                match response("user_name") {
                    None => input_required(
                        json!({"user_name": elicit("What is your name?", "name", "string")}),
                        None,
                    ),
                    Some(answer) => complete_text(&format!(
                        "Hello, {}!",
                        answer["content"]["name"].as_str().unwrap_or("stranger")
                    )),
                }
            }
            "test_input_required_result_sampling" => match response("capital_question") {
                None => input_required(
                    json!({"capital_question": sample("What is the capital of France?", 100)}),
                    None,
                ),
                Some(answer) => complete_text(&format!(
                    "The model said: {}",
                    answer["content"]["text"].as_str().unwrap_or_default()
                )),
            },
            "test_input_required_result_list_roots" => match response("client_roots") {
                None => input_required(json!({"client_roots": roots()}), None),
                Some(answer) => {
                    let uris: Vec<&str> = answer["roots"]
                        .as_array()
                        .map(|roots| roots.iter().filter_map(|r| r["uri"].as_str()).collect())
                        .unwrap_or_default();
                    complete_text(&format!("The client's roots: {}", uris.join(", ")))
                }
            },
            "test_input_required_result_request_state"
            | "test_input_required_result_tampered_state" => match state {
                Some(state) if answered("confirm") => {
                    self.verify(state)?;
                    complete_text("state-ok: the request state came back intact")
                }
                _ => input_required(
                    json!({"confirm": elicit("Please confirm", "ok", "boolean")}),
                    Some(self.sign(&format!("{name}:1"))),
                ),
            },
            "test_input_required_result_multiple_inputs" => match state {
                Some(state)
                    if ["user_name", "greeting", "client_roots"]
                        .iter()
                        .all(|k| answered(k)) =>
                {
                    self.verify(state)?;
                    complete_text("All three inputs arrived")
                }
                _ => input_required(
                    json!({
                        "user_name": elicit("What is your name?", "name", "string"),
                        "greeting": sample("Generate a greeting", 50),
                        "client_roots": roots(),
                    }),
                    Some(self.sign("multiple:1")),
                ),
            },
            "test_input_required_result_multi_round" => {
                let round = match state {
                    Some(state) => self.verify(state)?,
                    None => String::new(),
                };
                match round.as_str() {
                    "multi:1" if answered("step1") => input_required(
                        json!({"step2": elicit("Step 2: What is your favorite color?", "color", "string")}),
                        Some(self.sign("multi:2")),
                    ),
                    "multi:2" if answered("step2") => complete_text("Both steps are done"),
                    "multi:2" => input_required(
                        json!({"step2": elicit("Step 2: What is your favorite color?", "color", "string")}),
                        Some(self.sign("multi:2")),
                    ),
                    _ => input_required(
                        json!({"step1": elicit("Step 1: What is your name?", "name", "string")}),
                        Some(self.sign("multi:1")),
                    ),
                }
            }
            "test_input_required_result_capabilities" => {
                if responses.is_some_and(|r| r.as_object().is_some_and(|m| !m.is_empty())) {
                    complete_text("The inputs arrived")
                } else {
                    let caps = &request.client_capabilities;
                    let mut requests = serde_json::Map::new();
                    if caps.get("sampling").is_some() {
                        requests.insert("greeting".into(), sample("Generate a greeting", 50));
                    }
                    if caps.get("elicitation").is_some() {
                        requests.insert(
                            "user_name".into(),
                            elicit("What is your name?", "name", "string"),
                        );
                    }
                    if caps.get("roots").is_some() {
                        requests.insert("client_roots".into(), roots());
                    }
                    if requests.is_empty() {
                        complete_text("The client can give no input")
                    } else {
                        input_required(Value::Object(requests), None)
                    }
                }
            }
            _ => return Err(CatalogError::NotFound(name.to_owned())),
        })
    }
}

async fn with_logging() -> Result<ToolOutput, ToolError> {
    for data in [
        "Tool execution started",
        "Tool processing data",
        "Tool execution completed",
    ] {
        log("info", json!(data)).await;
    }
    Ok(parts(vec![text("Tool with logging executed successfully")]))
}

#[allow(deprecated)]
async fn sampling(arguments: Value) -> Result<ToolOutput, ToolError> {
    let peer = current_caller().ok_or_else(|| ToolError("no client to ask".into()))?;
    let prompt = arguments["prompt"].as_str().unwrap_or_default();
    let params = serde_json::from_value(json!({
        "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
        "maxTokens": 100
    }))
    .map_err(|e| ToolError(e.to_string()))?;
    let answer = match peer.create_message(params).await {
        Ok(result) => {
            let value = serde_json::to_value(&result).unwrap_or_default();
            let text = value["content"]["text"]
                .as_str()
                .or_else(|| value["content"][0]["text"].as_str())
                .unwrap_or("No response")
                .to_owned();
            format!("LLM response: {text}")
        }
        Err(e) => format!("Sampling not supported or error: {e}"),
    };
    Ok(parts(vec![text(&answer)]))
}

async fn elicitation(params: Value, label: &str) -> Result<ToolOutput, ToolError> {
    let peer = current_caller().ok_or_else(|| ToolError("no client to ask".into()))?;
    let params = serde_json::from_value(params).map_err(|e| ToolError(e.to_string()))?;
    let answer = match peer.create_elicitation(params).await {
        Ok(result) => {
            let value = serde_json::to_value(&result).unwrap_or_default();
            format!(
                "{label}: action={}, content={}",
                value["action"].as_str().unwrap_or_default(),
                value.get("content").cloned().unwrap_or(json!({}))
            )
        }
        Err(e) => format!("Elicitation not supported or error: {e}"),
    };
    Ok(parts(vec![text(&answer)]))
}

fn text_body(uri: &str, mime: &str, text: &str) -> ResourceBody {
    ResourceBody {
        uri: uri.into(),
        mime_type: Some(mime.into()),
        data: ResourceData::Text(text.into()),
    }
}

fn resource(uri: &str, name: &str, title: &str, mime: &str) -> ResourceInfo {
    ResourceInfo {
        uri: uri.into(),
        name: name.into(),
        title: Some(title.into()),
        description: Some(title.into()),
        mime_type: Some(mime.into()),
        size: None,
    }
}

fn argument(name: &str, description: &str) -> PromptArgumentInfo {
    PromptArgumentInfo {
        name: name.into(),
        description: Some(description.into()),
        required: true,
    }
}

#[async_trait]
impl Catalog for ConformanceCatalog {
    fn name(&self) -> String {
        "conduit-conformance-fixtures".into()
    }

    fn tools(&self) -> Vec<Arc<dyn Tool>> {
        self.tools.clone()
    }

    fn tool_requires(&self, name: &str) -> Option<Value> {
        (name == "test_missing_capability").then(|| json!({"sampling": {}}))
    }

    fn changes(&self) -> Option<broadcast::Receiver<CatalogChange>> {
        Some(self.changes.subscribe())
    }

    async fn answer_raw(&self, request: &RawRequest) -> Option<Result<Value, CatalogError>> {
        match request.method {
            "tools/call" if RAW_TOOLS.contains(&request.name.as_str()) => {
                Some(self.tool_answer(&request.name, request))
            }
            "prompts/get" if request.name == "test_input_required_result_prompt" => {
                let responses = request.params.get("inputResponses");
                Some(Ok(match responses.and_then(|r| r.get("user_context")) {
                    None => input_required(
                        json!({"user_context": elicit("What context should the prompt use?", "context", "string")}),
                        None,
                    ),
                    Some(answer) => json!({"messages": [{"role": "user", "content": {
                        "type": "text",
                        "text": format!("Use this context: {}", answer["content"]["context"].as_str().unwrap_or_default())
                    }}]}),
                }))
            }
            _ => None,
        }
    }

    async fn resources(&self) -> Result<Vec<ResourceInfo>, CatalogError> {
        Ok(vec![
            resource(
                "test://static-text",
                "static-text",
                "Static Text Resource",
                "text/plain",
            ),
            resource(
                "test://static-binary",
                "static-binary",
                "Static Binary Resource",
                "image/png",
            ),
            resource(
                "test://watched-resource",
                "watched-resource",
                "Watched Resource",
                "text/plain",
            ),
        ])
    }

    fn resource_templates(&self) -> Vec<ResourceTemplateInfo> {
        vec![ResourceTemplateInfo {
            uri_template: "test://template/{id}/data".into(),
            name: "template".into(),
            title: Some("Resource Template".into()),
            description: Some("A resource template with parameter substitution".into()),
            mime_type: Some("application/json".into()),
        }]
    }

    async fn read_resource(&self, uri: &str) -> Result<Vec<ResourceBody>, CatalogError> {
        let body = match uri {
            "test://static-text" => text_body(
                uri,
                "text/plain",
                "This is the content of the static text resource.",
            ),
            "test://watched-resource" => text_body(uri, "text/plain", "Watched resource content"),
            "test://static-binary" => ResourceBody {
                uri: uri.into(),
                mime_type: Some("image/png".into()),
                data: ResourceData::Binary(decode(TEST_IMAGE)),
            },
            _ => {
                let id = uri
                    .strip_prefix("test://template/")
                    .and_then(|rest| rest.strip_suffix("/data"))
                    .filter(|id| !id.is_empty() && !id.contains('/'))
                    .ok_or_else(|| CatalogError::NotFound(uri.to_owned()))?;
                let data =
                    json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")});
                text_body(uri, "application/json", &data.to_string())
            }
        };
        Ok(vec![body])
    }

    fn prompts(&self) -> Vec<PromptInfo> {
        let prompt = |name: &str, title: &str, arguments| PromptInfo {
            name: name.into(),
            title: Some(title.into()),
            description: Some(title.into()),
            arguments,
        };
        vec![
            prompt("test_simple_prompt", "Simple Test Prompt", Vec::new()),
            prompt(
                "test_prompt_with_arguments",
                "Prompt With Arguments",
                vec![
                    argument("arg1", "First test argument"),
                    argument("arg2", "Second test argument"),
                ],
            ),
            prompt(
                "test_prompt_with_embedded_resource",
                "Prompt With Embedded Resource",
                vec![argument("resourceUri", "URI of the resource to embed")],
            ),
            prompt("test_prompt_with_image", "Prompt With Image", Vec::new()),
            prompt(
                "test_input_required_result_prompt",
                "Asks the client for context first",
                Vec::new(),
            ),
        ]
    }

    async fn get_prompt(
        &self,
        name: &str,
        arguments: &HashMap<String, String>,
    ) -> Result<PromptBody, CatalogError> {
        let arg = |key: &str| arguments.get(key).cloned().unwrap_or_default();
        let messages = match name {
            "test_simple_prompt" => vec![PromptContent::Text(
                "This is a simple prompt for testing.".into(),
            )],
            "test_prompt_with_arguments" => vec![PromptContent::Text(format!(
                "Prompt with arguments: arg1='{}', arg2='{}'",
                arg("arg1"),
                arg("arg2")
            ))],
            "test_prompt_with_embedded_resource" => vec![
                PromptContent::Resource(text_body(
                    &arg("resourceUri"),
                    "text/plain",
                    "Embedded resource content for testing.",
                )),
                PromptContent::Text("Please process the embedded resource above.".into()),
            ],
            "test_prompt_with_image" => vec![
                PromptContent::Image {
                    data: decode(TEST_IMAGE),
                    mime_type: "image/png".into(),
                },
                PromptContent::Text("Please analyze the image above.".into()),
            ],
            _ => return Err(CatalogError::NotFound(name.to_owned())),
        };
        Ok(PromptBody {
            description: None,
            messages: messages
                .into_iter()
                .map(|content| (PromptRole::User, content))
                .collect(),
        })
    }
}

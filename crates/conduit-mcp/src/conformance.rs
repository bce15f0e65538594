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

use crate::server::{
    Catalog, CatalogError, PromptArgumentInfo, PromptBody, PromptContent, PromptInfo, PromptRole,
    ResourceBody, ResourceData, ResourceInfo, ResourceTemplateInfo, current_caller,
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
}

impl ConformanceCatalog {
    /// The fixtures; their image and audio are stored in `media` (results carry media).
    pub fn new(media: &dyn MediaStore) -> Result<Self, CatalogError> {
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
                "json_schema_2020_12_tool",
                "Tool with JSON Schema 2020-12 features for conformance testing (SEP-1613)",
                json!({
                    "$schema": "https://json-schema.org/draft/2020-12/schema",
                    "type": "object",
                    "$defs": {"address": {"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
                    "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
                    "additionalProperties": false
                }),
                Arc::new(|arguments: Value, _| {
                    done(parts(vec![text(&format!(
                        "JSON Schema 2020-12 tool called with: {arguments}"
                    ))]))
                }),
            ),
        ];
        Ok(Self { tools })
    }
}

#[allow(deprecated)]
async fn with_logging() -> Result<ToolOutput, ToolError> {
    if let Some(peer) = current_caller() {
        for data in [
            "Tool execution started",
            "Tool processing data",
            "Tool execution completed",
        ] {
            let param = serde_json::from_value(json!({"level": "info", "data": data}))
                .map_err(|e| ToolError(e.to_string()))?;
            peer.notify_logging_message(param)
                .await
                .map_err(|e| ToolError(e.to_string()))?;
        }
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

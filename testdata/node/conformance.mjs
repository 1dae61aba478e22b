// conformance.mjs checks renderings of tool definitions with the validators
// the providers' ecosystems use: Ajv compiles each rendered parameters
// schema under the dialect the provider states (JSON Schema 2020-12 for
// OpenAI, Anthropic, MCP and Gemini's parametersJsonSchema; the OpenAPI 3.0
// Schema object where a test asks for it) in strict mode, so an unknown keyword or a malformed schema is an error,
// then validates the instances the test gives; the MCP TypeScript SDK's
// own ToolSchema parses every mcp tool, and ListToolsResultSchema a list
// of them.
//
// stdin: {"cases": [{"id", "dialect": "2020-12" | "openapi-3.0",
//          "schema", "mcpTool"?, "valid": [...], "invalid": [...]}],
//         "listTools"?: {...}}
// stdout: {"results": [{"id", "compiled", "error"?, "validRejected": [...],
//          "invalidAccepted": [...], "mcpTool"?}], "listTools"?}
import { readFileSync } from "node:fs";
import Ajv2020 from "ajv/dist/2020.js";
import AjvDraft07 from "ajv";
import addFormats from "ajv-formats";
import { ToolSchema, ListToolsResultSchema } from "@modelcontextprotocol/sdk/types.js";

const input = JSON.parse(readFileSync(0, "utf8"));

// One validator per dialect, strict about the schema: an unknown keyword,
// an unknown format or a keyword ignored where it stands is an error, as
// where providers check schemas. Ajv's stylistic checks (strictTypes,
// strictTuples, strictRequired) flag valid JSON Schema and stay off.
function jsonSchema2020() {
  const ajv = new Ajv2020({ strict: true, strictTypes: false, strictTuples: false, strictRequired: false, allErrors: true });
  addFormats(ajv);
  return ajv;
}

// Gemini's parameters are an OpenAPI 3.0 Schema object: draft-04-like
// keywords, nullable instead of a null type, and Gemini's own
// propertyOrdering; its formats include enum, float, double, int32, int64.
function openAPI30() {
  const ajv = new AjvDraft07({ strict: true, strictTypes: false, strictTuples: false, strictRequired: false, allErrors: true });
  addFormats(ajv);
  for (const f of ["enum", "float", "double", "int32", "int64"]) ajv.addFormat(f, true);
  ajv.addKeyword({ keyword: "propertyOrdering", schemaType: "array" });
  ajv.addKeyword({ keyword: "example" });
  return ajv;
}

const errorsOf = (v) => (v.errors || []).map((e) => `${e.instancePath || "/"} ${e.message}`).join("; ");

const results = [];
for (const c of input.cases) {
  const r = { id: c.id, compiled: false, validRejected: [], invalidAccepted: [] };
  try {
    const ajv = c.dialect === "openapi-3.0" ? openAPI30() : jsonSchema2020();
    const validate = ajv.compile(c.schema);
    r.compiled = true;
    (c.valid || []).forEach((v, i) => {
      if (!validate(v)) r.validRejected.push(`#${i}: ${errorsOf(validate)}`);
    });
    (c.invalid || []).forEach((v, i) => {
      if (validate(v)) r.invalidAccepted.push(i);
    });
  } catch (e) {
    r.error = String(e.message || e);
  }
  if (c.mcpTool) {
    const parsed = ToolSchema.safeParse(c.mcpTool);
    r.mcpTool = parsed.success ? "ok" : parsed.error.message;
  }
  results.push(r);
}

const out = { results };
if (input.listTools) {
  const parsed = ListToolsResultSchema.safeParse(input.listTools);
  out.listTools = parsed.success ? `ok: ${parsed.data.tools.length} tools` : parsed.error.message;
}
process.stdout.write(JSON.stringify(out));

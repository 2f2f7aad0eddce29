variable "project" {
  type        = string
  description = "Google Cloud project id."
}

variable "region" {
  type        = string
  default     = "europe-west1"
  description = "Region of the Cloud Run services, topics and schedules."
}

variable "name" {
  type        = string
  default     = "yuxi"
  description = "Prefix of every resource name."
}

variable "image" {
  type        = string
  description = "Container image repository holding one image per function, tagged by function name (<image>:<function>), built from functions/<name>."
}

variable "functions" {
  type = map(object({
    memory  = string
    timeout = number
  }))
  default = {
    intake        = { memory = "1Gi", timeout = 900 }
    dispatcher    = { memory = "512Mi", timeout = 300 }
    "agent-step"  = { memory = "512Mi", timeout = 600 }
    "tool-invoke" = { memory = "1Gi", timeout = 600 }
    "doc-parse"   = { memory = "2Gi", timeout = 900 }
    "kb-index"    = { memory = "1Gi", timeout = 900 }
    "kb-graph"    = { memory = "1Gi", timeout = 900 }
    evaluate      = { memory = "1Gi", timeout = 900 }
  }
  description = "Every function deployed as a Cloud Run service scaling to zero."
}

variable "consumers" {
  type = map(list(string))
  default = {
    "agent-step"  = ["io.yuxi.agent.step.ready.v1"]
    "tool-invoke" = ["io.yuxi.tool.call.requested.v1"]
    dispatcher    = ["io.yuxi.run.finished.v1", "io.yuxi.dispatcher.sweep.requested.v1"]
    "doc-parse"   = ["io.yuxi.document.uploaded.v1", "io.yuxi.bucket.object.changed.v1"]
    "kb-index"    = ["io.yuxi.document.parsed.v1"]
    "kb-graph"    = ["io.yuxi.document.indexed.v1"]
    evaluate      = ["io.yuxi.evaluation.batch.ready.v1", "io.yuxi.evaluation.dataset.batch.ready.v1", "io.yuxi.evaluation.tick.v1", "io.yuxi.evaluation.regressed.v1"]
  }
  description = "Event types each consuming function handles: one Pub/Sub topic per consumer, an Eventarc trigger from it."
}

variable "schedules" {
  type = map(object({
    function   = string
    schedule   = string
    event_type = string
  }))
  default = {
    "dispatcher-sweep" = { function = "dispatcher", schedule = "* * * * *", event_type = "io.yuxi.dispatcher.sweep.requested.v1" }
  }
  description = "Cloud Scheduler jobs publishing a ce-type message to the consumer's topic (add io.yuxi.evaluation.tick.v1 for evaluate)."
}

variable "database_url" {
  type        = string
  sensitive   = true
  description = "DATABASE_URL of Cloud SQL for PostgreSQL (private IP, or the Cloud SQL connector's socket)."
}

variable "redis_url" {
  type        = string
  sensitive   = true
  description = "REDIS_URL of Memorystore for Redis."
}

variable "vpc_connector" {
  type        = string
  default     = ""
  description = "Serverless VPC Access connector reaching Cloud SQL and Memorystore (projects/…/locations/…/connectors/…)."
}

variable "jwt_secret" {
  type        = string
  sensitive   = true
  description = "YUXI_JWT_SECRET (at least 32 bytes)."
}

variable "api_key_secret" {
  type        = string
  sensitive   = true
  description = "YUXI_API_KEY_SECRET (at least 32 bytes)."
}

variable "function_env" {
  type        = map(string)
  default     = {}
  sensitive   = true
  description = "More environment for every function (model providers, OTEL_EXPORTER_OTLP_ENDPOINT, …)."
}

variable "provisioner" {
  type = object({
    enabled       = bool
    machine_type  = optional(string, "e2-standard-2")
    image         = optional(string, "")
    sandbox_image = optional(string, "")
    zone          = optional(string, "")
    network       = optional(string, "default")
    source_ranges = optional(list(string), ["10.8.0.0/28"])
  })
  default     = { enabled = false }
  description = "The sandbox provisioner on a Compute Engine VM with the docker backend (Cloud Run cannot run sandboxes): image is its container image (make images: <repo>:sandbox-provisioner), sandbox_image the sandboxes' image (infra/sandbox-provisioner/image), source_ranges the VPC connector's range allowed to reach it."
  validation {
    condition     = !var.provisioner.enabled || (var.provisioner.image != "" && var.provisioner.sandbox_image != "")
    error_message = "An enabled provisioner needs image and sandbox_image."
  }
}

variable "provisioner_token" {
  type        = string
  default     = ""
  sensitive   = true
  description = "SANDBOX_PROVISIONER_TOKEN shared by the provisioner and the functions (at least 32 characters; required with the provisioner)."
  validation {
    condition     = var.provisioner_token == "" || length(var.provisioner_token) >= 32
    error_message = "provisioner_token must be at least 32 characters."
  }
}

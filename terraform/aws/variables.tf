variable "region" {
  type        = string
  description = "AWS region to deploy to."
}

variable "name" {
  type        = string
  default     = "yuxi"
  description = "Prefix of every resource name."
}

variable "artifacts_dir" {
  type        = string
  default     = "../../bin/lambda"
  description = "Where make build-lambda wrote <function>.zip (each holding a bootstrap binary)."
}

variable "functions" {
  type = map(object({
    memory_mb   = number
    timeout_s   = number
    concurrency = optional(number, -1)
  }))
  default = {
    intake        = { memory_mb = 1024, timeout_s = 900 }
    dispatcher    = { memory_mb = 512, timeout_s = 300 }
    "agent-step"  = { memory_mb = 512, timeout_s = 600 }
    "tool-invoke" = { memory_mb = 1024, timeout_s = 600 }
    "doc-parse"   = { memory_mb = 2048, timeout_s = 900 }
    "kb-index"    = { memory_mb = 1024, timeout_s = 900 }
    "kb-graph"    = { memory_mb = 1024, timeout_s = 900 }
    evaluate      = { memory_mb = 1024, timeout_s = 900 }
  }
  description = "Every function built by make build-lambda (add the ones later issues bring, such as evaluate)."
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
  description = "Event types each consuming function handles (the Knative Triggers of knative/500-triggers.yaml): one EventBridge rule and SQS queue per consumer."
}

variable "schedules" {
  type = map(object({
    function   = string
    expression = string
    event_type = string
  }))
  default = {
    "dispatcher-sweep" = { function = "dispatcher", expression = "rate(1 minute)", event_type = "io.yuxi.dispatcher.sweep.requested.v1" }
  }
  description = "EventBridge Scheduler schedules; each invokes its function with a structured CloudEvent of event_type (add the evaluation tick, io.yuxi.evaluation.tick.v1, when the evaluate function is deployed)."
}

variable "database_url" {
  type        = string
  default     = ""
  sensitive   = true
  description = "DATABASE_URL of an existing PostgreSQL (RDS); empty with create_data_stores = true."
}

variable "redis_url" {
  type        = string
  default     = ""
  sensitive   = true
  description = "REDIS_URL of an existing Redis (ElastiCache); empty with create_data_stores = true."
}

variable "create_data_stores" {
  type        = bool
  default     = false
  description = "Create a small RDS PostgreSQL and ElastiCache Redis in subnet_ids instead of using database_url and redis_url."
}

variable "db_password" {
  type        = string
  default     = ""
  sensitive   = true
  description = "Master password of the created RDS instance (create_data_stores)."
}

variable "objects_bucket" {
  type        = string
  default     = ""
  description = "Existing S3 bucket for uploads and parsed documents; empty: one is created."
}

variable "subnet_ids" {
  type        = list(string)
  default     = []
  description = "Private subnets the functions (and created data stores) run in; empty: the functions run outside a VPC."
}

variable "security_group_ids" {
  type        = list(string)
  default     = []
  description = "Security groups of the functions when subnet_ids is set."
}

variable "jwt_secret" {
  type        = string
  sensitive   = true
  description = "YUXI_JWT_SECRET (at least 32 bytes)."
}

variable "api_key_secret" {
  type        = string
  sensitive   = true
  description = "YUXI_API_KEY_SECRET (at least 32 bytes, not the JWT secret)."
}

variable "function_env" {
  type        = map(string)
  default     = {}
  sensitive   = true
  description = "More environment for every function: model providers (YUXI_PROVIDER_*, *_API_KEY, YUXI_DEFAULT_MODEL), OTEL_EXPORTER_OTLP_ENDPOINT, …"
}

variable "provisioner" {
  type = object({
    enabled          = bool
    instance_type    = optional(string, "t3.medium")
    ami_id           = optional(string, "")
    image            = optional(string, "")
    sandbox_image    = optional(string, "")
    instance_profile = optional(string, "")
  })
  default     = { enabled = false }
  description = "The sandbox provisioner on one EC2 instance with the docker backend (Lambda cannot run sandboxes): image is its container image (make images: <repo>:sandbox-provisioner, linux/amd64), sandbox_image the sandboxes' image (infra/sandbox-provisioner/image), instance_profile one that may pull both."
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

variable "web_dir" {
  type        = string
  default     = "../../web/dist"
  description = "The built web UI, uploaded to the web bucket behind CloudFront (upload with aws s3 sync; see README)."
}

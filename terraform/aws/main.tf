data "aws_caller_identity" "current" {}

locals {
  bus_source     = "yuxi.outbox"
  objects_bucket = var.objects_bucket != "" ? var.objects_bucket : aws_s3_bucket.objects[0].bucket
  database_url   = var.create_data_stores ? "postgres://yuxi:${var.db_password}@${aws_db_instance.postgres[0].endpoint}/yuxi?sslmode=require" : var.database_url
  redis_url      = var.create_data_stores ? "redis://${aws_elasticache_cluster.redis[0].cache_nodes[0].address}:6379/0" : var.redis_url
  common_env = merge(var.function_env, {
    DATABASE_URL          = local.database_url
    REDIS_URL             = local.redis_url
    YUXI_JWT_SECRET       = var.jwt_secret
    YUXI_API_KEY_SECRET   = var.api_key_secret
    YUXI_RELAY            = "eventbridge"
    YUXI_EVENTBRIDGE_BUS  = aws_cloudwatch_event_bus.events.name
    YUXI_BLOB_URI         = "s3://${local.objects_bucket}/objects?region=${var.region}"
    YUXI_SSE_MAX_DURATION = "14m"
  }, local.sandbox_env)
  # The functions reach the provisioner at its private address (the sandbox tools, files and skills).
  sandbox_env = var.provisioner.enabled ? {
    SANDBOX_PROVISIONER_URL   = "http://${aws_instance.provisioner[0].private_ip}:${local.provisioner_port}"
    SANDBOX_PROVISIONER_TOKEN = var.provisioner_token
  } : {}
  provisioner_port = 8002
}

# ---- data stores (optional) -------------------------------------------------

resource "aws_db_subnet_group" "db" {
  count      = var.create_data_stores ? 1 : 0
  name       = "${var.name}-db"
  subnet_ids = var.subnet_ids
}

resource "aws_db_instance" "postgres" {
  count                  = var.create_data_stores ? 1 : 0
  identifier             = "${var.name}-postgres"
  engine                 = "postgres"
  engine_version         = "16"
  instance_class         = "db.t4g.micro"
  allocated_storage      = 20
  db_name                = "yuxi"
  username               = "yuxi"
  password               = var.db_password
  db_subnet_group_name   = aws_db_subnet_group.db[0].name
  vpc_security_group_ids = var.security_group_ids
  skip_final_snapshot    = true
}

resource "aws_elasticache_subnet_group" "redis" {
  count      = var.create_data_stores ? 1 : 0
  name       = "${var.name}-redis"
  subnet_ids = var.subnet_ids
}

resource "aws_elasticache_cluster" "redis" {
  count              = var.create_data_stores ? 1 : 0
  cluster_id         = "${var.name}-redis"
  engine             = "redis"
  node_type          = "cache.t4g.micro"
  num_cache_nodes    = 1
  subnet_group_name  = aws_elasticache_subnet_group.redis[0].name
  security_group_ids = var.security_group_ids
}

# ---- object store -------------------------------------------------------------

resource "aws_s3_bucket" "objects" {
  count         = var.objects_bucket == "" ? 1 : 0
  bucket_prefix = "${var.name}-objects-"
}

# ---- functions ----------------------------------------------------------------

resource "aws_iam_role" "function" {
  for_each = var.functions
  name     = "${var.name}-${each.key}"
  assume_role_policy = jsonencode({
    Version   = "2012-10-17"
    Statement = [{ Effect = "Allow", Action = "sts:AssumeRole", Principal = { Service = "lambda.amazonaws.com" } }]
  })
}

resource "aws_iam_role_policy_attachment" "logs" {
  for_each   = var.functions
  role       = aws_iam_role.function[each.key].name
  policy_arn = "arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"
}

resource "aws_iam_role_policy_attachment" "vpc" {
  for_each   = length(var.subnet_ids) > 0 ? var.functions : {}
  role       = aws_iam_role.function[each.key].name
  policy_arn = "arn:aws:iam::aws:policy/service-role/AWSLambdaVPCAccessExecutionRole"
}

# Least privilege: every function publishes its outbox to the bus and reads
# and writes the object store; a consumer also drains its own queue.
resource "aws_iam_role_policy" "function" {
  for_each = var.functions
  name     = "yuxi"
  role     = aws_iam_role.function[each.key].id
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = concat([
      { Effect = "Allow", Action = ["events:PutEvents"], Resource = [aws_cloudwatch_event_bus.events.arn] },
      { Effect = "Allow", Action = ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"], Resource = ["arn:aws:s3:::${local.objects_bucket}/*"] },
      { Effect = "Allow", Action = ["s3:ListBucket"], Resource = ["arn:aws:s3:::${local.objects_bucket}"] },
      ], contains(keys(var.consumers), each.key) ? [
      { Effect = "Allow", Action = ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:ChangeMessageVisibility"], Resource = [aws_sqs_queue.consumer[each.key].arn] },
    ] : [])
  })
}

resource "aws_lambda_function" "fn" {
  for_each                       = var.functions
  function_name                  = "${var.name}-${each.key}"
  role                           = aws_iam_role.function[each.key].arn
  runtime                        = "provided.al2023"
  architectures                  = ["arm64"]
  handler                        = "bootstrap"
  filename                       = "${var.artifacts_dir}/${each.key}.zip"
  source_code_hash               = filebase64sha256("${var.artifacts_dir}/${each.key}.zip")
  memory_size                    = each.value.memory_mb
  timeout                        = each.value.timeout_s
  reserved_concurrent_executions = each.value.concurrency

  environment {
    variables = local.common_env
  }

  dynamic "vpc_config" {
    for_each = length(var.subnet_ids) > 0 ? [1] : []
    content {
      subnet_ids         = var.subnet_ids
      security_group_ids = var.security_group_ids
    }
  }
}

# intake behind a Function URL streaming its responses (SSE).
resource "aws_lambda_function_url" "intake" {
  function_name      = aws_lambda_function.fn["intake"].function_name
  authorization_type = "NONE"
  invoke_mode        = "RESPONSE_STREAM"
}

# ---- events: bus → rule per consumer → queue (+ DLQ) → function ---------------

resource "aws_cloudwatch_event_bus" "events" {
  name = "${var.name}-events"
}

resource "aws_sqs_queue" "dlq" {
  for_each                  = var.consumers
  name                      = "${var.name}-${each.key}-dlq"
  message_retention_seconds = 1209600
}

resource "aws_sqs_queue" "consumer" {
  for_each = var.consumers
  name     = "${var.name}-${each.key}"
  # Six times the function's timeout, as Lambda recommends for event sources.
  visibility_timeout_seconds = 6 * var.functions[each.key].timeout_s
  redrive_policy = jsonencode({
    deadLetterTargetArn = aws_sqs_queue.dlq[each.key].arn
    maxReceiveCount     = 5
  })
}

resource "aws_cloudwatch_event_rule" "consumer" {
  for_each       = var.consumers
  name           = "${var.name}-${each.key}"
  event_bus_name = aws_cloudwatch_event_bus.events.name
  event_pattern = jsonencode({
    source        = [local.bus_source]
    "detail-type" = each.value
  })
}

resource "aws_cloudwatch_event_target" "consumer" {
  for_each       = var.consumers
  rule           = aws_cloudwatch_event_rule.consumer[each.key].name
  event_bus_name = aws_cloudwatch_event_bus.events.name
  arn            = aws_sqs_queue.consumer[each.key].arn
}

resource "aws_sqs_queue_policy" "consumer" {
  for_each  = var.consumers
  queue_url = aws_sqs_queue.consumer[each.key].id
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = concat([{
      Effect    = "Allow"
      Principal = { Service = "events.amazonaws.com" }
      Action    = "sqs:SendMessage"
      Resource  = aws_sqs_queue.consumer[each.key].arn
      Condition = { ArnEquals = { "aws:SourceArn" = aws_cloudwatch_event_rule.consumer[each.key].arn } }
      }], each.key == "doc-parse" ? [{
      Effect    = "Allow"
      Principal = { Service = "s3.amazonaws.com" }
      Action    = "sqs:SendMessage"
      Resource  = aws_sqs_queue.consumer[each.key].arn
      Condition = { ArnLike = { "aws:SourceArn" = "arn:aws:s3:::${local.objects_bucket}" } }
    }] : [])
  })
}

resource "aws_lambda_event_source_mapping" "consumer" {
  for_each                           = var.consumers
  event_source_arn                   = aws_sqs_queue.consumer[each.key].arn
  function_name                      = aws_lambda_function.fn[each.key].arn
  batch_size                         = 10
  maximum_batching_window_in_seconds = 0
  function_response_types            = ["ReportBatchItemFailures"]
}

# Bucket notifications → doc-parse's queue (its translator reads S3 records).
resource "aws_s3_bucket_notification" "objects" {
  bucket = local.objects_bucket
  queue {
    queue_arn     = aws_sqs_queue.consumer["doc-parse"].arn
    events        = ["s3:ObjectCreated:*", "s3:ObjectRemoved:*"]
    filter_prefix = "sources/"
  }
  depends_on = [aws_sqs_queue_policy.consumer]
}

# ---- schedules ----------------------------------------------------------------

resource "aws_iam_role" "scheduler" {
  name = "${var.name}-scheduler"
  assume_role_policy = jsonencode({
    Version   = "2012-10-17"
    Statement = [{ Effect = "Allow", Action = "sts:AssumeRole", Principal = { Service = "scheduler.amazonaws.com" } }]
  })
}

resource "aws_iam_role_policy" "scheduler" {
  name = "invoke"
  role = aws_iam_role.scheduler.id
  policy = jsonencode({
    Version   = "2012-10-17"
    Statement = [{ Effect = "Allow", Action = "lambda:InvokeFunction", Resource = [for s in var.schedules : aws_lambda_function.fn[s.function].arn] }]
  })
}

resource "aws_scheduler_schedule" "tick" {
  for_each            = var.schedules
  name                = "${var.name}-${each.key}"
  schedule_expression = each.value.expression
  flexible_time_window {
    mode = "OFF"
  }
  target {
    arn      = aws_lambda_function.fn[each.value.function].arn
    role_arn = aws_iam_role.scheduler.arn
    # A structured CloudEvent: one id per firing, the scheduled time as its time.
    input = jsonencode({
      specversion     = "1.0"
      type            = each.value.event_type
      source          = "<aws.scheduler.schedule-arn>"
      id              = "<aws.scheduler.execution-id>"
      time            = "<aws.scheduler.scheduled-time>"
      datacontenttype = "application/json"
      data            = { reason = "schedule" }
    })
    retry_policy {
      maximum_retry_attempts = 3
    }
  }
}

# ---- sandbox provisioner (docker backend on one instance) ---------------------

data "aws_ssm_parameter" "al2023" {
  name = "/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-x86_64"
}

resource "aws_instance" "provisioner" {
  count                  = var.provisioner.enabled ? 1 : 0
  ami                    = var.provisioner.ami_id != "" ? var.provisioner.ami_id : data.aws_ssm_parameter.al2023.value
  instance_type          = var.provisioner.instance_type
  subnet_id              = length(var.subnet_ids) > 0 ? var.subnet_ids[0] : null
  vpc_security_group_ids = var.security_group_ids
  iam_instance_profile   = var.provisioner.instance_profile != "" ? var.provisioner.instance_profile : null
  user_data = templatefile("${path.module}/provisioner.sh.tftpl", {
    image         = var.provisioner.image
    sandbox_image = var.provisioner.sandbox_image
    token         = var.provisioner_token
    port          = local.provisioner_port
  })
  tags = {
    Name = "${var.name}-provisioner"
  }
}

# The functions share the provisioner's security group: members may reach its port.
resource "aws_vpc_security_group_ingress_rule" "provisioner" {
  count                        = var.provisioner.enabled && length(var.security_group_ids) > 0 ? 1 : 0
  security_group_id            = var.security_group_ids[0]
  referenced_security_group_id = var.security_group_ids[0]
  ip_protocol                  = "tcp"
  from_port                    = local.provisioner_port
  to_port                      = local.provisioner_port
  description                  = "functions to the sandbox provisioner"
}

# ---- web UI: S3 behind CloudFront, /api/* to the intake Function URL ----------

resource "aws_s3_bucket" "web" {
  bucket_prefix = "${var.name}-web-"
}

resource "aws_cloudfront_origin_access_control" "web" {
  name                              = "${var.name}-web"
  origin_access_control_origin_type = "s3"
  signing_behavior                  = "always"
  signing_protocol                  = "sigv4"
}

# The SPA fallback: a page path (no file extension) is the app's index.html,
# its router shows the page; /api/* never reaches this behaviour.
resource "aws_cloudfront_function" "web_spa" {
  name    = "${var.name}-web-spa"
  runtime = "cloudfront-js-2.0"
  comment = "Serve index.html for the web UI's page paths"
  publish = true
  code    = <<-EOT
    function handler(event) {
      var r = event.request;
      if (r.uri.indexOf('.') < 0) { r.uri = '/index.html'; }
      return r;
    }
  EOT
}

resource "aws_cloudfront_distribution" "web" {
  enabled             = true
  default_root_object = "index.html"

  origin {
    origin_id                = "web"
    domain_name              = aws_s3_bucket.web.bucket_regional_domain_name
    origin_access_control_id = aws_cloudfront_origin_access_control.web.id
  }

  origin {
    origin_id   = "intake"
    domain_name = replace(replace(aws_lambda_function_url.intake.function_url, "https://", ""), "/", "")
    custom_origin_config {
      http_port              = 80
      https_port             = 443
      origin_protocol_policy = "https-only"
      origin_ssl_protocols   = ["TLSv1.2"]
      origin_read_timeout    = 60
    }
  }

  default_cache_behavior {
    target_origin_id       = "web"
    viewer_protocol_policy = "redirect-to-https"
    allowed_methods        = ["GET", "HEAD"]
    cached_methods         = ["GET", "HEAD"]
    cache_policy_id        = "658327ea-f89d-4fab-a63d-7e88639e58f6" # Managed-CachingOptimized (honours the objects' Cache-Control)
    function_association {
      event_type   = "viewer-request"
      function_arn = aws_cloudfront_function.web_spa.arn
    }
  }

  ordered_cache_behavior {
    path_pattern             = "/api/*"
    target_origin_id         = "intake"
    viewer_protocol_policy   = "https-only"
    allowed_methods          = ["GET", "HEAD", "OPTIONS", "PUT", "POST", "PATCH", "DELETE"]
    cached_methods           = ["GET", "HEAD"]
    cache_policy_id          = "4135ea2d-6df8-44a3-9df3-4b5a84be39ad" # Managed-CachingDisabled
    origin_request_policy_id = "b689b0a8-53d0-40ab-baf2-68738e2966ac" # Managed-AllViewerExceptHostHeader
  }

  restrictions {
    geo_restriction {
      restriction_type = "none"
    }
  }

  viewer_certificate {
    cloudfront_default_certificate = true
  }
}

resource "aws_s3_bucket_policy" "web" {
  bucket = aws_s3_bucket.web.id
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Effect    = "Allow"
      Principal = { Service = "cloudfront.amazonaws.com" }
      Action    = "s3:GetObject"
      Resource  = "${aws_s3_bucket.web.arn}/*"
      Condition = { StringEquals = { "AWS:SourceArn" = aws_cloudfront_distribution.web.arn } }
    }]
  })
}

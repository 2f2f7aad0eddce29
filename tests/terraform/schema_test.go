package terraform

// The hand-curated provider schema the configurations are checked against:
// for each resource and data source type used, its arguments, nested blocks
// and the attributes it exports, as documented for the provider versions
// pinned below (the Terraform Registry's docs for hashicorp/aws 5.80 and
// hashicorp/google 6.10). Only what terraform/ uses is listed; a type or
// argument not listed fails the test, so using a new one means checking the
// provider docs and adding it here.

var pinnedProviders = map[string]string{
	"aws":    "~> 5.80",
	"google": "~> 6.10",
}

type schema struct {
	args    []string           // arguments (configurable attributes)
	blocks  map[string]*schema // nested blocks
	exports []string           // attributes readable by references (besides args)
}

func s(args []string, blocks map[string]*schema, exports ...string) *schema {
	return &schema{args: args, blocks: blocks, exports: exports}
}

func a(names ...string) []string { return names }

var resources = map[string]*schema{
	// ---- hashicorp/aws ~> 5.80 ----
	"aws_db_subnet_group": s(a("name", "name_prefix", "subnet_ids", "description", "tags"), nil, "id", "arn"),
	"aws_db_instance": s(a("identifier", "engine", "engine_version", "instance_class", "allocated_storage", "db_name", "username",
		"password", "db_subnet_group_name", "vpc_security_group_ids", "skip_final_snapshot", "storage_encrypted", "multi_az",
		"publicly_accessible", "backup_retention_period", "tags"), nil, "id", "arn", "endpoint", "address", "port"),
	"aws_elasticache_subnet_group": s(a("name", "subnet_ids", "description", "tags"), nil, "id", "arn"),
	"aws_elasticache_cluster": s(a("cluster_id", "engine", "engine_version", "node_type", "num_cache_nodes", "subnet_group_name",
		"security_group_ids", "port", "parameter_group_name", "tags"), nil, "id", "arn", "cache_nodes", "cluster_address", "configuration_endpoint"),
	"aws_s3_bucket":        s(a("bucket", "bucket_prefix", "force_destroy", "tags"), nil, "id", "arn", "bucket_regional_domain_name", "bucket_domain_name", "region"),
	"aws_s3_bucket_policy": s(a("bucket", "policy"), nil, "id"),
	"aws_s3_bucket_notification": s(a("bucket", "eventbridge"), map[string]*schema{
		"queue":           s(a("id", "queue_arn", "events", "filter_prefix", "filter_suffix"), nil),
		"lambda_function": s(a("id", "lambda_function_arn", "events", "filter_prefix", "filter_suffix"), nil),
	}, "id"),
	"aws_iam_role":                   s(a("name", "name_prefix", "assume_role_policy", "description", "path", "max_session_duration", "tags"), nil, "id", "arn", "unique_id"),
	"aws_iam_role_policy_attachment": s(a("role", "policy_arn"), nil, "id"),
	"aws_iam_role_policy":            s(a("name", "name_prefix", "role", "policy"), nil, "id"),
	"aws_lambda_function": s(a("function_name", "role", "runtime", "architectures", "handler", "filename", "source_code_hash",
		"memory_size", "timeout", "reserved_concurrent_executions", "image_uri", "package_type", "s3_bucket", "s3_key", "layers", "publish", "tags"),
		map[string]*schema{
			"environment":       s(a("variables"), nil),
			"vpc_config":        s(a("subnet_ids", "security_group_ids", "ipv6_allowed_for_dual_stack"), nil),
			"ephemeral_storage": s(a("size"), nil),
			"logging_config":    s(a("log_format", "log_group", "application_log_level", "system_log_level"), nil),
		}, "id", "arn", "invoke_arn", "qualified_arn", "version"),
	"aws_lambda_function_url": s(a("function_name", "authorization_type", "invoke_mode", "qualifier"),
		map[string]*schema{"cors": s(a("allow_credentials", "allow_headers", "allow_methods", "allow_origins", "expose_headers", "max_age"), nil)},
		"id", "function_arn", "function_url", "url_id"),
	"aws_cloudwatch_event_bus": s(a("name", "event_source_name", "kms_key_identifier", "tags"), nil, "id", "arn"),
	"aws_sqs_queue": s(a("name", "name_prefix", "fifo_queue", "content_based_deduplication", "visibility_timeout_seconds",
		"message_retention_seconds", "receive_wait_time_seconds", "delay_seconds", "max_message_size", "redrive_policy",
		"sqs_managed_sse_enabled", "tags"), nil, "id", "arn", "url"),
	"aws_sqs_queue_policy": s(a("queue_url", "policy"), nil, "id"),
	"aws_cloudwatch_event_rule": s(a("name", "name_prefix", "event_bus_name", "event_pattern", "schedule_expression", "description",
		"state", "role_arn", "tags"), nil, "id", "arn"),
	"aws_cloudwatch_event_target": s(a("rule", "event_bus_name", "arn", "target_id", "input", "input_path", "role_arn"),
		map[string]*schema{
			"sqs_target":         s(a("message_group_id"), nil),
			"retry_policy":       s(a("maximum_event_age_in_seconds", "maximum_retry_attempts"), nil),
			"dead_letter_config": s(a("arn"), nil),
		}, "id"),
	"aws_lambda_event_source_mapping": s(a("event_source_arn", "function_name", "batch_size", "maximum_batching_window_in_seconds",
		"function_response_types", "enabled", "starting_position"),
		map[string]*schema{"scaling_config": s(a("maximum_concurrency"), nil)}, "id", "uuid", "function_arn"),
	"aws_scheduler_schedule": s(a("name", "name_prefix", "group_name", "schedule_expression", "schedule_expression_timezone", "state",
		"description", "start_date", "end_date"),
		map[string]*schema{
			"flexible_time_window": s(a("mode", "maximum_window_in_minutes"), nil),
			"target": s(a("arn", "role_arn", "input"), map[string]*schema{
				"retry_policy":       s(a("maximum_event_age_in_seconds", "maximum_retry_attempts"), nil),
				"dead_letter_config": s(a("arn"), nil),
			}),
		}, "id", "arn"),
	"aws_instance": s(a("ami", "instance_type", "subnet_id", "vpc_security_group_ids", "user_data", "user_data_base64",
		"iam_instance_profile", "key_name", "associate_public_ip_address", "tags"),
		map[string]*schema{"root_block_device": s(a("volume_size", "volume_type", "encrypted"), nil)},
		"id", "arn", "private_ip", "public_ip", "private_dns"),
	"aws_vpc_security_group_ingress_rule": s(a("security_group_id", "referenced_security_group_id", "cidr_ipv4", "cidr_ipv6",
		"prefix_list_id", "ip_protocol", "from_port", "to_port", "description", "tags"), nil, "id", "arn", "security_group_rule_id"),
	"aws_cloudfront_function": s(a("name", "runtime", "code", "comment", "publish", "key_value_store_associations"), nil,
		"id", "arn", "etag", "live_stage_etag", "status"),
	"aws_cloudfront_origin_access_control": s(a("name", "description", "origin_access_control_origin_type", "signing_behavior", "signing_protocol"), nil, "id", "etag"),
	"aws_cloudfront_distribution": s(a("enabled", "default_root_object", "comment", "price_class", "aliases", "http_version", "is_ipv6_enabled", "web_acl_id", "tags"),
		map[string]*schema{
			"origin": s(a("origin_id", "domain_name", "origin_access_control_id", "origin_path", "connection_attempts", "connection_timeout"),
				map[string]*schema{
					"custom_origin_config": s(a("http_port", "https_port", "origin_protocol_policy", "origin_ssl_protocols",
						"origin_read_timeout", "origin_keepalive_timeout"), nil),
					"s3_origin_config": s(a("origin_access_identity"), nil),
				}),
			"default_cache_behavior": s(a("target_origin_id", "viewer_protocol_policy", "allowed_methods", "cached_methods", "cache_policy_id",
				"origin_request_policy_id", "response_headers_policy_id", "compress"),
				map[string]*schema{"function_association": s(a("event_type", "function_arn"), nil)}),
			"ordered_cache_behavior": s(a("path_pattern", "target_origin_id", "viewer_protocol_policy", "allowed_methods", "cached_methods",
				"cache_policy_id", "origin_request_policy_id", "response_headers_policy_id", "compress"), nil),
			"restrictions":          s(nil, map[string]*schema{"geo_restriction": s(a("restriction_type", "locations"), nil)}),
			"viewer_certificate":    s(a("cloudfront_default_certificate", "acm_certificate_arn", "ssl_support_method", "minimum_protocol_version"), nil),
			"custom_error_response": s(a("error_code", "response_code", "response_page_path", "error_caching_min_ttl"), nil),
		}, "id", "arn", "domain_name", "hosted_zone_id", "etag"),

	// ---- hashicorp/google ~> 6.10 ----
	"google_project_service":                 s(a("project", "service", "disable_on_destroy", "disable_dependent_services"), nil, "id"),
	"google_service_account":                 s(a("account_id", "display_name", "description", "project", "disabled"), nil, "id", "email", "name", "unique_id", "member"),
	"google_pubsub_topic_iam_member":         s(a("topic", "role", "member", "project"), nil, "id", "etag"),
	"google_storage_bucket_iam_member":       s(a("bucket", "role", "member"), nil, "id", "etag"),
	"google_project_iam_member":              s(a("project", "role", "member"), nil, "id", "etag"),
	"google_cloud_run_v2_service_iam_member": s(a("name", "location", "project", "role", "member"), nil, "id", "etag"),
	"google_cloud_run_v2_service": s(a("name", "location", "project", "ingress", "deletion_protection", "description", "labels", "launch_stage"),
		map[string]*schema{
			"template": s(a("service_account", "timeout", "max_instance_request_concurrency", "execution_environment", "labels", "annotations"),
				map[string]*schema{
					"scaling":    s(a("min_instance_count", "max_instance_count"), nil),
					"vpc_access": s(a("connector", "egress"), nil),
					"containers": s(a("image", "name", "args", "command", "working_dir"), map[string]*schema{
						"resources": s(a("limits", "cpu_idle", "startup_cpu_boost"), nil),
						"env":       s(a("name", "value"), nil),
						"ports":     s(a("container_port", "name"), nil),
					}),
				}),
			"scaling": s(a("min_instance_count"), nil),
		}, "id", "uri", "urls"),
	"google_pubsub_topic": s(a("name", "project", "labels", "message_retention_duration", "kms_key_name"), nil, "id"),
	"google_eventarc_trigger": s(a("name", "location", "project", "service_account", "labels", "event_data_content_type"),
		map[string]*schema{
			"matching_criteria": s(a("attribute", "value", "operator"), nil),
			"transport":         s(nil, map[string]*schema{"pubsub": s(a("topic"), nil, "subscription")}),
			"destination": s(a("workflow"), map[string]*schema{
				"cloud_run_service": s(a("service", "region", "path"), nil),
			}),
		}, "id", "uid"),
	"google_cloud_scheduler_job": s(a("name", "region", "project", "schedule", "time_zone", "description", "paused", "attempt_deadline"),
		map[string]*schema{
			"pubsub_target": s(a("topic_name", "data", "attributes"), nil),
			"http_target":   s(a("uri", "http_method", "body", "headers"), nil),
			"retry_config":  s(a("retry_count", "max_retry_duration", "min_backoff_duration", "max_backoff_duration", "max_doublings"), nil),
		}, "id"),
	"google_storage_bucket": s(a("name", "location", "project", "uniform_bucket_level_access", "force_destroy", "storage_class", "labels", "public_access_prevention"),
		map[string]*schema{
			"website": s(a("main_page_suffix", "not_found_page"), nil),
			"cors":    s(a("origin", "method", "response_header", "max_age_seconds"), nil),
		}, "id", "url", "self_link"),
	"google_compute_firewall": s(a("name", "network", "project", "direction", "priority", "source_ranges", "source_tags",
		"target_tags", "destination_ranges", "description", "disabled"),
		map[string]*schema{"allow": s(a("protocol", "ports"), nil), "deny": s(a("protocol", "ports"), nil)}, "id", "self_link"),
	"google_compute_instance": s(a("name", "machine_type", "zone", "project", "metadata", "metadata_startup_script", "tags", "labels", "allow_stopping_for_update"),
		map[string]*schema{
			"boot_disk":         s(a("auto_delete", "device_name"), map[string]*schema{"initialize_params": s(a("image", "size", "type"), nil)}),
			"network_interface": s(a("network", "subnetwork", "network_ip"), map[string]*schema{"access_config": s(a("nat_ip", "network_tier"), nil)}),
			"service_account":   s(a("email", "scopes"), nil),
		}, "id", "instance_id", "self_link"),
}

var dataSources = map[string]*schema{
	"aws_caller_identity":                    s(nil, nil, "account_id", "arn", "user_id", "id"),
	"aws_ssm_parameter":                      s(a("name", "with_decryption"), nil, "value", "insecure_value", "arn", "type", "version"),
	"google_project":                         s(a("project_id"), nil, "number", "project_id", "name", "id"),
	"google_storage_project_service_account": s(a("project", "user_project"), nil, "email_address", "member", "id"),
}

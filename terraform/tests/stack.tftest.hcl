# Plan-level checks of the whole stack against a mocked AWS provider: no credentials, no API calls.
# Computed attributes the assertions compare (ARNs, the repository URL) get fixed values during plan
# (override_during = plan) so that, e.g., a queue can be checked to point at the right environment.

mock_provider "aws" {
  override_during = plan

  mock_data "aws_partition" {
    defaults = { partition = "aws" }
  }
  mock_data "aws_caller_identity" {
    defaults = { account_id = "123456789012" }
  }
  mock_resource "aws_ecr_repository" {
    defaults = {
      arn            = "arn:aws:ecr:us-east-1:123456789012:repository/cleanrl"
      repository_url = "123456789012.dkr.ecr.us-east-1.amazonaws.com/cleanrl"
    }
  }
  mock_resource "aws_cloudwatch_log_group" {
    defaults = { arn = "arn:aws:logs:us-east-1:123456789012:log-group:/aws/batch/cleanrl" }
  }
  mock_resource "aws_s3_bucket" {
    defaults = { id = "cleanrl-runs-0123", arn = "arn:aws:s3:::cleanrl-runs-0123" }
  }
  mock_resource "aws_iam_instance_profile" {
    defaults = { arn = "arn:aws:iam::123456789012:instance-profile/cleanrl-ecs-instance" }
  }
}

override_resource {
  override_during = plan
  target          = aws_iam_role.job_execution
  values          = { arn = "arn:aws:iam::123456789012:role/cleanrl-job-execution" }
}
override_resource {
  override_during = plan
  target          = aws_iam_role.job
  values          = { arn = "arn:aws:iam::123456789012:role/cleanrl-job" }
}
override_resource {
  override_during = plan
  target          = aws_iam_role.batch_service
  values          = { arn = "arn:aws:iam::123456789012:role/cleanrl-batch-service" }
}
override_resource {
  override_during = plan
  target          = aws_batch_compute_environment.this["cpu_on_demand"]
  values          = { arn = "arn:aws:batch:us-east-1:123456789012:compute-environment/cleanrl-cpu-on-demand" }
}
override_resource {
  override_during = plan
  target          = aws_batch_compute_environment.this["cpu_spot"]
  values          = { arn = "arn:aws:batch:us-east-1:123456789012:compute-environment/cleanrl-cpu-spot" }
}
override_resource {
  override_during = plan
  target          = aws_batch_compute_environment.this["gpu_on_demand"]
  values          = { arn = "arn:aws:batch:us-east-1:123456789012:compute-environment/cleanrl-gpu-on-demand" }
}
override_resource {
  override_during = plan
  target          = aws_batch_compute_environment.this["gpu_spot"]
  values          = { arn = "arn:aws:batch:us-east-1:123456789012:compute-environment/cleanrl-gpu-spot" }
}

variables {
  subnet_ids         = ["subnet-0123456789abcdef0", "subnet-0fedcba9876543210"]
  security_group_ids = ["sg-0123456789abcdef0"]
  wandb_api_key_arn  = "arn:aws:secretsmanager:us-east-1:123456789012:secret:cleanrl/wandb-api-key-AbCdEf"
}

run "defaults_compute_environments_and_queues" {
  command = plan

  assert {
    condition     = toset(keys(aws_batch_compute_environment.this)) == toset(["cpu_on_demand", "cpu_spot", "gpu_on_demand", "gpu_spot"])
    error_message = "expected exactly four compute environments"
  }
  assert {
    condition     = alltrue([for ce in aws_batch_compute_environment.this : ce.type == "MANAGED" && ce.service_role == "arn:aws:iam::123456789012:role/cleanrl-batch-service"])
    error_message = "every compute environment is MANAGED and uses the stack's Batch service role"
  }
  assert {
    condition = (
      aws_batch_compute_environment.this["cpu_spot"].compute_resources[0].type == "SPOT" &&
      aws_batch_compute_environment.this["gpu_spot"].compute_resources[0].type == "SPOT" &&
      aws_batch_compute_environment.this["cpu_on_demand"].compute_resources[0].type == "EC2" &&
      aws_batch_compute_environment.this["gpu_on_demand"].compute_resources[0].type == "EC2"
    )
    error_message = "spot environments must be SPOT and on-demand ones EC2"
  }
  assert {
    condition = (
      aws_batch_compute_environment.this["cpu_spot"].compute_resources[0].bid_percentage == 100 &&
      aws_batch_compute_environment.this["gpu_spot"].compute_resources[0].bid_percentage == 100 &&
      aws_batch_compute_environment.this["cpu_on_demand"].compute_resources[0].bid_percentage == null &&
      aws_batch_compute_environment.this["gpu_on_demand"].compute_resources[0].bid_percentage == null
    )
    error_message = "spot environments bid the default 100%; on-demand ones have no bid"
  }
  assert {
    condition = (
      aws_batch_compute_environment.this["cpu_spot"].compute_resources[0].allocation_strategy == "SPOT_PRICE_CAPACITY_OPTIMIZED" &&
      aws_batch_compute_environment.this["cpu_on_demand"].compute_resources[0].allocation_strategy == "BEST_FIT_PROGRESSIVE" &&
      alltrue([for ce in aws_batch_compute_environment.this : ce.compute_resources[0].spot_iam_fleet_role == null])
    )
    error_message = "spot uses SPOT_PRICE_CAPACITY_OPTIMIZED (no spot fleet role), on-demand BEST_FIT_PROGRESSIVE"
  }
  assert {
    condition = (
      aws_batch_compute_environment.this["cpu_spot"].compute_resources[0].instance_type == toset(["c6i", "m6i", "c5", "m5"]) &&
      aws_batch_compute_environment.this["cpu_on_demand"].compute_resources[0].instance_type == toset(["c6i", "m6i", "c5", "m5"]) &&
      aws_batch_compute_environment.this["gpu_spot"].compute_resources[0].instance_type == toset(["g4dn", "g5"]) &&
      aws_batch_compute_environment.this["gpu_on_demand"].compute_resources[0].instance_type == toset(["g4dn", "g5"])
    )
    error_message = "CPU environments use cpu_instance_types, GPU ones gpu_instance_types"
  }
  assert {
    condition = (
      aws_batch_compute_environment.this["gpu_spot"].compute_resources[0].ec2_configuration[0].image_type == "ECS_AL2023_NVIDIA" &&
      aws_batch_compute_environment.this["cpu_spot"].compute_resources[0].ec2_configuration[0].image_type == "ECS_AL2023"
    )
    error_message = "GPU environments need the NVIDIA ECS AMI"
  }
  assert {
    condition = (
      alltrue([for ce in aws_batch_compute_environment.this : ce.compute_resources[0].min_vcpus == 0]) &&
      aws_batch_compute_environment.this["cpu_on_demand"].compute_resources[0].max_vcpus == 16 &&
      aws_batch_compute_environment.this["cpu_spot"].compute_resources[0].max_vcpus == 64 &&
      aws_batch_compute_environment.this["gpu_on_demand"].compute_resources[0].max_vcpus == 8 &&
      aws_batch_compute_environment.this["gpu_spot"].compute_resources[0].max_vcpus == 32
    )
    error_message = "all environments scale to zero; max_vcpus defaults per environment"
  }
  assert {
    condition = alltrue([for ce in aws_batch_compute_environment.this : (
      ce.compute_resources[0].subnets == toset(var.subnet_ids) &&
      ce.compute_resources[0].security_group_ids == toset(var.security_group_ids) &&
      ce.compute_resources[0].instance_role == "arn:aws:iam::123456789012:instance-profile/cleanrl-ecs-instance"
    )])
    error_message = "every environment uses the given subnets and security groups and the ECS instance profile"
  }
  assert {
    condition = (
      aws_launch_template.batch.metadata_options[0].http_tokens == "required" &&
      aws_launch_template.batch.metadata_options[0].http_put_response_hop_limit == 1 &&
      aws_launch_template.batch.block_device_mappings[0].ebs[0].encrypted == "true"
    )
    error_message = "instances require IMDSv2 with hop limit 1 and have an encrypted root volume"
  }
  assert {
    condition     = alltrue([for ce in aws_batch_compute_environment.this : ce.compute_resources[0].launch_template[0].version == "$Latest"])
    error_message = "environments follow the launch template's $Latest version (a version number would force their replacement on every template change)"
  }

  assert {
    condition = alltrue([for k, q in aws_batch_job_queue.this : (
      q.name == "cleanrl-${replace(k, "_", "-")}" &&
      q.state == "ENABLED" &&
      length(q.compute_environment_order) == 1 &&
      q.compute_environment_order[0].order == 1 &&
      q.compute_environment_order[0].compute_environment == aws_batch_compute_environment.this[k].arn
    )])
    error_message = "each queue is named after and feeds exactly its own compute environment"
  }
  assert {
    condition     = aws_batch_job_queue.this["gpu_spot"].compute_environment_order[0].compute_environment == "arn:aws:batch:us-east-1:123456789012:compute-environment/cleanrl-gpu-spot"
    error_message = "the gpu_spot queue must feed the GPU spot environment"
  }
  assert {
    condition = (
      output.job_queue_names == {
        cpu_on_demand = "cleanrl-cpu-on-demand"
        cpu_spot      = "cleanrl-cpu-spot"
        gpu_on_demand = "cleanrl-gpu-on-demand"
        gpu_spot      = "cleanrl-gpu-spot"
      } &&
      output.job_queues["gpu_spot"].gpu && output.job_queues["gpu_spot"].spot &&
      !output.job_queues["cpu_on_demand"].gpu && !output.job_queues["cpu_on_demand"].spot
    )
    error_message = "job_queue_names / job_queues outputs"
  }
}

run "defaults_job_definition_and_iam" {
  command = plan

  assert {
    condition = (
      aws_batch_job_definition.this.name == "cleanrl" &&
      aws_batch_job_definition.this.type == "container" &&
      aws_batch_job_definition.this.platform_capabilities == toset(["EC2"])
    )
    error_message = "one EC2 container job definition named after the prefix"
  }
  assert {
    condition     = jsondecode(aws_batch_job_definition.this.container_properties).image == "123456789012.dkr.ecr.us-east-1.amazonaws.com/cleanrl:latest"
    error_message = "the image comes from the stack's ECR repository with image_tag"
  }
  assert {
    condition = jsondecode(aws_batch_job_definition.this.container_properties).secrets == [
      { name = "WANDB_API_KEY", valueFrom = "arn:aws:secretsmanager:us-east-1:123456789012:secret:cleanrl/wandb-api-key-AbCdEf" },
    ]
    error_message = "the W&B key reaches the job through `secrets`, by reference"
  }
  assert {
    condition = (
      jsondecode(aws_batch_job_definition.this.container_properties).environment == [{ name = "AWS_DEFAULT_REGION", value = "us-east-1" }] &&
      !strcontains(aws_batch_job_definition.this.container_properties, "\"WANDB_API_KEY\",\"value\"")
    )
    error_message = "the only plain variable by default is the region (and so no plain W&B key)"
  }
  assert {
    condition = (
      jsondecode(aws_batch_job_definition.this.container_properties).executionRoleArn == "arn:aws:iam::123456789012:role/cleanrl-job-execution" &&
      jsondecode(aws_batch_job_definition.this.container_properties).jobRoleArn == "arn:aws:iam::123456789012:role/cleanrl-job"
    )
    error_message = "execution role and job role are the stack's"
  }
  assert {
    condition = jsondecode(aws_batch_job_definition.this.container_properties).resourceRequirements == [
      { type = "VCPU", value = "2" },
      { type = "MEMORY", value = "3072" },
    ]
    error_message = "default resources: 2 vCPUs, 3072 MiB, no GPU"
  }
  assert {
    condition     = jsondecode(aws_batch_job_definition.this.container_properties).command == ["python", "cleanrl/ppo.py", "--help"]
    error_message = "default command"
  }
  assert {
    condition = jsondecode(aws_batch_job_definition.this.container_properties).logConfiguration == {
      logDriver = "awslogs"
      options = {
        "awslogs-group"         = "/aws/batch/cleanrl"
        "awslogs-region"        = "us-east-1"
        "awslogs-stream-prefix" = "cleanrl"
      }
    }
    error_message = "logs go to the stack's log group"
  }
  assert {
    condition = (
      aws_batch_job_definition.this.timeout[0].attempt_duration_seconds == 86400 &&
      aws_batch_job_definition.this.retry_strategy[0].attempts == 3 &&
      aws_batch_job_definition.this.retry_strategy[0].evaluate_on_exit[0].on_status_reason == "Host EC2*" &&
      aws_batch_job_definition.this.retry_strategy[0].evaluate_on_exit[0].action == "RETRY" &&
      aws_batch_job_definition.this.retry_strategy[0].evaluate_on_exit[1].on_exit_code == "143" &&
      aws_batch_job_definition.this.retry_strategy[0].evaluate_on_exit[1].action == "RETRY" &&
      aws_batch_job_definition.this.retry_strategy[0].evaluate_on_exit[2].on_reason == "*" &&
      aws_batch_job_definition.this.retry_strategy[0].evaluate_on_exit[2].action == "EXIT" &&
      length(aws_batch_job_definition.this.retry_strategy[0].evaluate_on_exit) == 3
    )
    error_message = "timeout 24 h; retries only when the instance went away (Host EC2*, or a SIGTERM exit Batch did not send)"
  }
  assert {
    condition = (
      strcontains(base64decode(aws_launch_template.batch.user_data), "ECS_CONTAINER_STOP_TIMEOUT=120s") &&
      strcontains(base64decode(aws_launch_template.batch.user_data), "ECS_ENABLE_SPOT_INSTANCE_DRAINING=true") &&
      startswith(base64decode(aws_launch_template.batch.user_data), "MIME-Version: 1.0")
    )
    error_message = "instances give a stopped job 120 s between SIGTERM and SIGKILL, in the MIME user data Batch merges"
  }
  assert {
    condition     = aws_cloudwatch_log_group.jobs.name == "/aws/batch/cleanrl" && aws_cloudwatch_log_group.jobs.retention_in_days == 30
    error_message = "log group and its retention"
  }
  assert {
    condition = (
      aws_ecr_repository.this.image_tag_mutability == "IMMUTABLE" &&
      aws_ecr_repository.this.image_scanning_configuration[0].scan_on_push &&
      output.ecr_repository_url == "123456789012.dkr.ecr.us-east-1.amazonaws.com/cleanrl" &&
      output.log_group_name == "/aws/batch/cleanrl" &&
      output.job_definition_name == "cleanrl"
    )
    error_message = "ECR repository settings and outputs"
  }

  assert {
    condition = {
      for s in jsondecode(aws_iam_role_policy.job_execution.policy).Statement : s.Sid => [s.Action, s.Resource]
      } == {
      ReadWandbApiKey = [["secretsmanager:GetSecretValue"], ["arn:aws:secretsmanager:us-east-1:123456789012:secret:cleanrl/wandb-api-key-AbCdEf"]]
      PullJobImage    = [["ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"], ["arn:aws:ecr:us-east-1:123456789012:repository/cleanrl"]]
      EcrLogin        = [["ecr:GetAuthorizationToken"], ["*"]]
      WriteJobLogs    = [["logs:CreateLogStream", "logs:PutLogEvents"], ["arn:aws:logs:us-east-1:123456789012:log-group:/aws/batch/cleanrl:log-stream:*"]]
    }
    error_message = "the execution role reads the one secret, pulls the one repository, writes the one log group, and nothing else"
  }
  assert {
    condition     = alltrue([for s in jsondecode(aws_iam_role_policy.job_execution.policy).Statement : s.Effect == "Allow" && !contains(s.Action, "*") && (s.Resource != ["*"] || s.Action == ["ecr:GetAuthorizationToken"])])
    error_message = "no wildcard action; a wildcard resource only for the unscopable ECR login"
  }
  assert {
    condition     = length(aws_iam_role_policy_attachment.job) == 0
    error_message = "the job role has no permissions by default"
  }
  assert {
    condition = alltrue([for r in [aws_iam_role.job, aws_iam_role.job_execution] : jsondecode(r.assume_role_policy).Statement == [{
      Effect    = "Allow"
      Principal = { Service = "ecs-tasks.amazonaws.com" }
      Action    = "sts:AssumeRole"
      Condition = { StringEquals = { "aws:SourceAccount" = "123456789012" } }
    }]])
    error_message = "job and execution roles trust ECS tasks of this account only"
  }
  assert {
    condition = (
      jsondecode(aws_iam_role.batch_service.assume_role_policy).Statement[0].Principal.Service == "batch.amazonaws.com" &&
      aws_iam_role_policy_attachment.batch_service.policy_arn == "arn:aws:iam::aws:policy/service-role/AWSBatchServiceRole" &&
      jsondecode(aws_iam_role.ecs_instance.assume_role_policy).Statement[0].Principal.Service == "ec2.amazonaws.com" &&
      aws_iam_role_policy_attachment.ecs_instance.policy_arn == "arn:aws:iam::aws:policy/service-role/AmazonEC2ContainerServiceforEC2Role" &&
      aws_iam_instance_profile.ecs_instance.role == aws_iam_role.ecs_instance.name
    )
    error_message = "Batch service role and ECS instance role with their AWS-managed policies"
  }
}

run "variables_reach_environments_and_job_definition" {
  command = plan

  variables {
    spot_bid_percentage       = 60
    max_vcpus                 = { gpu_spot = 4 }
    cpu_instance_types        = ["c7i.large"]
    gpu_instance_types        = ["g6.xlarge"]
    image_tag                 = "3f2a9c1"
    job_vcpus                 = 4
    job_memory_mib            = 15000
    job_gpus                  = 1
    job_command               = ["python", "cleanrl/dqn_atari.py", "--track"]
    job_environment           = { WANDB_PROJECT = "cleanrl", WANDB_ENTITY = "openrlbenchmark" }
    job_timeout_seconds       = 3600
    job_attempts              = 1
    job_stop_timeout_seconds  = 45
    run_store_expiration_days = 30
    run_store_force_destroy   = true
  }

  assert {
    condition = (
      aws_batch_compute_environment.this["cpu_spot"].compute_resources[0].bid_percentage == 60 &&
      aws_batch_compute_environment.this["gpu_spot"].compute_resources[0].bid_percentage == 60
    )
    error_message = "spot_bid_percentage must reach both spot environments"
  }
  assert {
    condition = (
      aws_batch_compute_environment.this["gpu_spot"].compute_resources[0].max_vcpus == 4 &&
      aws_batch_compute_environment.this["cpu_spot"].compute_resources[0].max_vcpus == 64
    )
    error_message = "a max_vcpus entry overrides its environment only"
  }
  assert {
    condition = (
      aws_batch_compute_environment.this["cpu_on_demand"].compute_resources[0].instance_type == toset(["c7i.large"]) &&
      aws_batch_compute_environment.this["gpu_spot"].compute_resources[0].instance_type == toset(["g6.xlarge"])
    )
    error_message = "instance type lists come from the variables"
  }

  assert {
    condition = jsondecode(aws_batch_job_definition.this.container_properties).resourceRequirements == [
      { type = "VCPU", value = "4" },
      { type = "MEMORY", value = "15000" },
      { type = "GPU", value = "1" },
    ]
    error_message = "vCPU, memory and GPU requirements come from the variables"
  }
  assert {
    condition = (
      jsondecode(aws_batch_job_definition.this.container_properties).image == "123456789012.dkr.ecr.us-east-1.amazonaws.com/cleanrl:3f2a9c1" &&
      jsondecode(aws_batch_job_definition.this.container_properties).command == ["python", "cleanrl/dqn_atari.py", "--track"]
    )
    error_message = "image tag and command come from the variables"
  }
  assert {
    condition = (
      jsondecode(aws_batch_job_definition.this.container_properties).environment == [
        { name = "AWS_DEFAULT_REGION", value = "us-east-1" },
        { name = "WANDB_ENTITY", value = "openrlbenchmark" },
        { name = "WANDB_PROJECT", value = "cleanrl" },
      ] &&
      length(jsondecode(aws_batch_job_definition.this.container_properties).secrets) == 1
    )
    error_message = "plain variables go to environment, the key stays in secrets"
  }
  assert {
    condition     = aws_batch_job_definition.this.timeout[0].attempt_duration_seconds == 3600 && aws_batch_job_definition.this.retry_strategy[0].attempts == 1
    error_message = "timeout and attempts come from the variables"
  }
  assert {
    condition = (
      strcontains(base64decode(aws_launch_template.batch.user_data), "ECS_CONTAINER_STOP_TIMEOUT=45s") &&
      aws_s3_bucket_lifecycle_configuration.runs.rule[0].expiration[0].days == 30 &&
      aws_s3_bucket.runs.force_destroy
    )
    error_message = "the stop timeout, the run store's expiration and force_destroy come from the variables"
  }
}

run "run_store_private_encrypted_and_scoped" {
  command = plan

  assert {
    condition = (
      output.run_store == "s3://cleanrl-runs-0123/runs" &&
      output.run_store_bucket == "cleanrl-runs-0123" &&
      startswith(aws_s3_bucket.runs.bucket_prefix, "cleanrl-runs-") &&
      !aws_s3_bucket.runs.force_destroy
    )
    error_message = "the run store is s3://BUCKET/runs; its bucket is not destroyed with objects in it by default"
  }
  assert {
    condition = (
      aws_s3_bucket_public_access_block.runs.block_public_acls &&
      aws_s3_bucket_public_access_block.runs.block_public_policy &&
      aws_s3_bucket_public_access_block.runs.ignore_public_acls &&
      aws_s3_bucket_public_access_block.runs.restrict_public_buckets &&
      aws_s3_bucket_ownership_controls.runs.rule[0].object_ownership == "BucketOwnerEnforced"
    )
    error_message = "no public access of any kind, no ACLs"
  }
  assert {
    condition = (
      one(one(aws_s3_bucket_server_side_encryption_configuration.runs.rule).apply_server_side_encryption_by_default).sse_algorithm == "aws:kms" &&
      one(aws_s3_bucket_server_side_encryption_configuration.runs.rule).bucket_key_enabled
    )
    error_message = "objects are encrypted with KMS, with a bucket key"
  }
  assert {
    condition = (
      aws_s3_bucket_lifecycle_configuration.runs.rule[0].abort_incomplete_multipart_upload[0].days_after_initiation == 1 &&
      length(aws_s3_bucket_lifecycle_configuration.runs.rule[0].expiration) == 0
    )
    error_message = "cut-short uploads are aborted after a day; run folders are kept by default"
  }
  assert {
    condition = jsondecode(aws_s3_bucket_policy.runs.policy).Statement == [{
      Sid       = "TlsOnly"
      Effect    = "Deny"
      Principal = "*"
      Action    = "s3:*"
      Resource  = ["arn:aws:s3:::cleanrl-runs-0123", "arn:aws:s3:::cleanrl-runs-0123/*"]
      Condition = { Bool = { "aws:SecureTransport" = "false" } }
    }]
    error_message = "the bucket policy only denies unencrypted connections (it grants nothing)"
  }
  assert {
    condition = {
      for s in jsondecode(aws_iam_role_policy.job_run_store.policy).Statement : s.Sid => [s.Effect, s.Action, s.Resource, try(s.Condition, null)]
      } == {
      ReadWriteRunFolders = ["Allow", ["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload"], ["arn:aws:s3:::cleanrl-runs-0123/runs/*"], null]
      ListRunFolders      = ["Allow", ["s3:ListBucket"], ["arn:aws:s3:::cleanrl-runs-0123"], { StringLike = { "s3:prefix" = ["runs/*"] } }]
    }
    error_message = "the job role reads, writes and lists runs/ only: no other prefix, no deletes, no bucket settings"
  }
}

run "ssm_parameter_with_kms_key" {
  command = plan

  variables {
    wandb_api_key_arn         = "arn:aws:ssm:us-east-1:123456789012:parameter/cleanrl/wandb_api_key"
    wandb_api_key_kms_key_arn = "arn:aws:kms:us-east-1:123456789012:key/11111111-2222-3333-4444-555555555555"
    job_role_policy_arns      = ["arn:aws:iam::123456789012:policy/cleanrl-results-bucket"]
  }

  assert {
    condition = {
      for s in jsondecode(aws_iam_role_policy.job_execution.policy).Statement : s.Sid => [s.Action, s.Resource] if contains(["ReadWandbApiKey", "DecryptWandbApiKey"], s.Sid)
      } == {
      ReadWandbApiKey    = [["ssm:GetParameters"], ["arn:aws:ssm:us-east-1:123456789012:parameter/cleanrl/wandb_api_key"]]
      DecryptWandbApiKey = [["kms:Decrypt"], ["arn:aws:kms:us-east-1:123456789012:key/11111111-2222-3333-4444-555555555555"]]
    }
    error_message = "an SSM parameter is read with ssm:GetParameters on its ARN; the customer key only decrypts"
  }
  assert {
    condition     = [for s in jsondecode(aws_iam_role_policy.job_execution.policy).Statement : s.Condition if s.Sid == "DecryptWandbApiKey"] == [{ StringEquals = { "kms:ViaService" = "ssm.us-east-1.amazonaws.com" } }]
    error_message = "kms:Decrypt only through SSM"
  }
  assert {
    condition     = jsondecode(aws_batch_job_definition.this.container_properties).secrets == [{ name = "WANDB_API_KEY", valueFrom = "arn:aws:ssm:us-east-1:123456789012:parameter/cleanrl/wandb_api_key" }]
    error_message = "an SSM parameter is passed by reference too"
  }
  assert {
    condition     = [for a in aws_iam_role_policy_attachment.job : a.policy_arn] == ["arn:aws:iam::123456789012:policy/cleanrl-results-bucket"]
    error_message = "job_role_policy_arns are attached to the job role, and only they"
  }
}

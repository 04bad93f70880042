# Bad input stops the plan at the variables' validation blocks. A run may give several bad values:
# `expect_failures` then requires every listed variable to report its own error (a variable whose
# validation let its bad value through fails the run with "Missing expected failure"). Good values
# of the same variables plan in stack.tftest.hcl.

mock_provider "aws" {
  mock_data "aws_partition" {
    defaults = { partition = "aws" }
  }
  mock_data "aws_caller_identity" {
    defaults = { account_id = "123456789012" }
  }
}

variables {
  subnet_ids         = ["subnet-0123456789abcdef0"]
  security_group_ids = ["sg-0123456789abcdef0"]
  wandb_api_key_arn  = "arn:aws:secretsmanager:us-east-1:123456789012:secret:cleanrl/wandb-api-key-AbCdEf"
}

run "bid_above_100_empty_lists_and_bad_network_ids" {
  command = plan
  variables {
    spot_bid_percentage = 101
    cpu_instance_types  = []
    gpu_instance_types  = []
    max_vcpus           = { cpu_spot = -1 }
    subnet_ids          = []
    security_group_ids  = ["default"]
  }
  expect_failures = [
    var.spot_bid_percentage, var.cpu_instance_types, var.gpu_instance_types, var.max_vcpus, var.subnet_ids,
    var.security_group_ids,
  ]
}

run "bid_zero_bad_type_names_and_wandb_key_in_plain_sight" {
  command = plan
  variables {
    spot_bid_percentage = 0
    cpu_instance_types  = ["c6i", ""]
    gpu_instance_types  = ["g4dn", "c6i.large"]
    # the key itself pasted where its secret's ARN belongs, and the key as a plain environment value
    wandb_api_key_arn = "0000000000000000000000000000000000000000"
    job_environment   = { WANDB_API_KEY = "0000000000000000000000000000000000000000" }
  }
  expect_failures = [
    var.spot_bid_percentage, var.cpu_instance_types, var.gpu_instance_types, var.wandb_api_key_arn,
    var.job_environment,
  ]
}

run "fractional_bid_bad_names_and_job_settings" {
  command = plan
  variables {
    spot_bid_percentage = 50.5
    name_prefix         = "CleanRL"
    log_retention_days  = 10
    job_timeout_seconds = 30
    job_attempts        = 11
    job_command         = []
    image_tag           = "-latest"
    job_gpus            = -1
  }
  expect_failures = [
    var.spot_bid_percentage, var.name_prefix, var.log_retention_days, var.job_timeout_seconds, var.job_attempts,
    var.job_command, var.image_tag, var.job_gpus,
  ]
}

run "stop_timeout_and_run_store_expiration" {
  command = plan
  variables {
    job_stop_timeout_seconds  = 10
    run_store_expiration_days = 0
  }
  expect_failures = [var.job_stop_timeout_seconds, var.run_store_expiration_days]
}

"""Loader.stats(): the counters since the loader opened, as one dict (the C
extension's ffpy_stats.c builds it from ff_loader_stats; here op costs get their
per-image and per-pixel figures and the remote workers' own figures join in).
Loader derives from LoaderStats; the docstring below is the keys' reference.
"""


class LoaderStats:
    def stats(self):
        """Counters since the loader opened, as a dict.

        Keys (times in nanoseconds summed over worker threads, except wait_ns):
            batches, samples (int): handed out.
            read_ns, decode_ns, ops_ns (int): reading files, decoding, running the ops.
            wait_ns (int): wall time the consumer waited for batches.
            read_bytes (int): encoded bytes read.
            skipped (int): samples skipped under on_error="skip";
            replaced (int): samples replaced under on_error="replace";
            skipped_samples (list of str): "path: reason" of each distinct failure, skipped or replaced
                (a file failing in several epochs is listed once; at most 1000).
            warnings (int): samples decoded despite corrupt data libjpeg repaired;
            warning_samples (list of str): "path: damage", each listed once (at most 1000).
            num_threads (int): worker threads.
            device (str): the device in use ("cpu", "emu:0", "cuda:0 (NVIDIA H200)").
            device_samples, device_fallbacks (int): samples the device prepared; samples
                meant for it that the CPU prepared after a refusal or a device error.
            device_ns (int): device time of the microbatches.
            device_budget_refusals (int): times the device memory budget said no
                (a batch it admitted no device sample of, or a microbatch refused
                for memory); see release_torch_cache.
            fences (int), fence_wait_ns (int): events recorded after the trainer's
                copies of host batches (one per next() when the batches are pinned),
                and the time a worker waited for one (see "Copies to the GPU").
            device_pool_limit_bytes, device_pool_peak_bytes (int): the device memory
                budget now, and the most the loader held.
            offload_share (float): the scheduler's current device share, 0..1.
            device_decoder (str): what decodes device-placed samples ("libjpeg-turbo",
                "nvjpeg-like", "nvjpeg-hardware", "nvjpeg-hybrid") or "none";
                device_decoder_note (str): why it is "none" (also when its failures
                turned it off during the run).
            decoders (str): which decoders decoded the samples handed out:
                "libjpeg-turbo" (the CPU workers), the device decoder's name, both
                joined by "+", or "none"; cpu_decodes, device_decodes (int): how
                many each.
            device_decode_failures, device_decode_failed_batches,
                device_decode_small_batches (int): images a failed device decode
                handed back to the CPU workers; batches whose device decode failed;
                batches too small for the device decoder (nvJPEG hybrid: 50 or
                fewer), decoded by the workers.
            output_upload_bytes (int): bytes that went up to output_device (the
                host-prepared samples).
            device_download_bytes (int): bytes of device-prepared samples that came
                down to host memory (0 when output_device is the offload device: they
                are written in place).
            host_round_trips (int): device-prepared samples that went down and up again
                (output_device another device than the offload device).
            feeder_cpu_ns (int): CPU time of the device feeder's threads (their waits sleep).
            thread_cpu_samples, thread_cpu_ns, thread_decode_cpu_ns (int): the samples the
                CPU worker threads ran start to finish, the threads' own CPU time on them
                (the thread CPU clock, which other processes' use of the cores does not
                inflate) and the part of it spent decoding.
            batch_stage_ns (int): the mixup_cutmix batch stage (consumer thread, in next();
                with a device output_device its draws and soft labels: the images are
                mixed on the device).
            held (int): batches handed out and still referenced.
            source_ignored_files (int): files in the class folders of a folder
                source left out for their extension (not one of torchvision's
                IMG_EXTENSIONS), as ImageFolder leaves them out.
            source_ignored_members (int): members of a tar: source's shards that belong
                to no sample (no suffix, a .json or .txt, a second image...), as
                webdataset ignores them.
            node_group (str): the node group whose coordinator sets num_threads
                (FF_NODE_GROUP, auto resolved), or "" when the loader runs alone.
            host_memory_pinned (bool): the host batches are in pinned memory (pin_memory).
            op_costs (dict): per kind of op (``"resize"``, ``"fused_lut"``, ...):
                calls, ns, pixels (ints), ns_per_image, ns_per_pixel (floats).
            remote (dict): remote workers (``remote=``; docs/remote.md): placement_samples
                (samples handed out by placement: "cpu", "split", "device", "remote"),
                workers, share (the policy's remote share now), microbatches (completed),
                latency_ns (their round trips summed), rtt_s (the round trip expected now),
                bytes_sent (encoded bytes sent: 0 when the workers read the source),
                bytes_received (uint8 results), retries, worker_cpu_ns (the actors' CPU
                time), convert_ns (this process converting remote samples), fallbacks
                (samples sent remote that ran here), timeouts, late (results dropped),
                note (why remote work stopped, or ""); with remote workers also
                actors_started, actors_killed (past their deadline), actors_lost,
                dropped_results, gave_up (microbatches out of attempts), pool_lost, actors.
        """
        c = self._open()
        s = c.stats()
        s["held"] = c.held()
        costs = {}
        for entry in s["op_costs"]:
            calls, ns, pixels = entry["calls"], entry["ns"], entry["pixels"]
            costs[entry["op"]] = {"calls": calls, "ns": ns, "pixels": pixels,
                                  "ns_per_image": ns / calls if calls else 0.0,
                                  "ns_per_pixel": ns / pixels if pixels else 0.0}
        s["op_costs"] = costs
        if self._remote is not None:
            s["remote"].update(self._remote.stats())
        return s

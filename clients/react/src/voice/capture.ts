// Microphone capture: a MediaStream through an AudioWorklet, brought to 24 kHz mono pcm16
// and handed out as base64 frames ready for `input_audio_buffer.append`.

import { encodePcm16Base64, floatToPcm16, StreamResampler, VOICE_SAMPLE_RATE } from "./pcm.js";

/** The AudioWorkletProcessor's name, registered once per AudioContext. */
const PROCESSOR_NAME = "cairn-voice-capture";

/**
 * The worklet, inlined so consumers need no extra file: it mixes its input down to mono (the
 * node asks for one channel) and posts blocks of float samples to the main thread, which
 * resamples and encodes them. Kept tiny: it runs on the audio thread.
 */
const WORKLET_SOURCE = `
class CairnVoiceCapture extends AudioWorkletProcessor {
  constructor(options) {
    super();
    this.size = (options.processorOptions && options.processorOptions.blockSize) || 960;
    this.block = new Float32Array(this.size);
    this.filled = 0;
  }
  process(inputs) {
    const input = inputs[0];
    const channel = input && input[0];
    if (channel) {
      let read = 0;
      while (read < channel.length) {
        const take = Math.min(channel.length - read, this.size - this.filled);
        this.block.set(channel.subarray(read, read + take), this.filled);
        this.filled += take;
        read += take;
        if (this.filled === this.size) {
          this.port.postMessage(this.block, [this.block.buffer]);
          this.block = new Float32Array(this.size);
          this.filled = 0;
        }
      }
    }
    return true;
  }
}
registerProcessor(${JSON.stringify(PROCESSOR_NAME)}, CairnVoiceCapture);
`;

/** Worklet modules loaded, per context: `addModule` once each. */
const loaded = new WeakMap<BaseAudioContext, Promise<void>>();

/** Loads the capture worklet into `context` (once) from a Blob URL. */
export function loadCaptureWorklet(context: BaseAudioContext): Promise<void> {
  let loading = loaded.get(context);
  if (loading === undefined) {
    const url = URL.createObjectURL(new Blob([WORKLET_SOURCE], { type: "text/javascript" }));
    loading = context.audioWorklet.addModule(url).finally(() => URL.revokeObjectURL(url));
    loaded.set(context, loading);
    loading.catch(() => loaded.delete(context));
  }
  return loading;
}

export interface MicrophoneCaptureOptions {
  context: AudioContext;
  stream: MediaStream;
  /** Milliseconds of audio per frame (default 40; the socket takes 20–100 ms frames). */
  frameMs?: number;
  /** Each frame: base64 pcm16 24 kHz mono, and the number of samples it holds. */
  onFrame: (audio: string, samples: number) => void;
}

export interface MicrophoneCapture {
  /** Stops capturing and disconnects the nodes (the stream's tracks stay the caller's). */
  stop(): void;
}

/** Captures `stream` on `context`, calling `onFrame` with every `frameMs` of audio. */
export async function startMicrophoneCapture(options: MicrophoneCaptureOptions): Promise<MicrophoneCapture> {
  const { context, stream, onFrame } = options;
  const frameSamples = Math.round(((options.frameMs ?? 40) * VOICE_SAMPLE_RATE) / 1000);
  await loadCaptureWorklet(context);
  const source = context.createMediaStreamSource(stream);
  // The node's output (silence) goes to the destination through a muted gain, so every
  // engine pulls the node, whether or not it processes nodes without outputs.
  const node = new AudioWorkletNode(context, PROCESSOR_NAME, {
    numberOfInputs: 1,
    numberOfOutputs: 1,
    outputChannelCount: [1],
    channelCount: 1,
    channelCountMode: "explicit",
    channelInterpretation: "speakers",
    processorOptions: { blockSize: Math.max(128, Math.round(context.sampleRate / 50)) },
  });
  const resampler = new StreamResampler(context.sampleRate, VOICE_SAMPLE_RATE);
  let pending = new Float32Array(0);
  let stopped = false;
  node.port.onmessage = (message: MessageEvent<Float32Array>) => {
    if (stopped) {
      return;
    }
    const resampled = resampler.push(message.data);
    const joined = new Float32Array(pending.length + resampled.length);
    joined.set(pending);
    joined.set(resampled, pending.length);
    let start = 0;
    while (joined.length - start >= frameSamples) {
      const frame = joined.subarray(start, start + frameSamples);
      onFrame(encodePcm16Base64(floatToPcm16(frame)), frame.length);
      start += frameSamples;
    }
    pending = joined.slice(start);
  };
  const sink = context.createGain();
  sink.gain.value = 0;
  source.connect(node);
  node.connect(sink);
  sink.connect(context.destination);
  return {
    stop() {
      if (stopped) {
        return;
      }
      stopped = true;
      node.port.onmessage = null;
      source.disconnect();
      node.disconnect();
      sink.disconnect();
      node.port.close();
    },
  };
}

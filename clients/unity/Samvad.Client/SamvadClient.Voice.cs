// SamvadClient, voice: the learner's microphone as `audio` frames (docs/voice.md). A live stream
// (BeginUtterance: start, chunks, end) is the quick path; its turn is also kept as one whole `clip`
// frame with the same id, which is what a reconnect re-sends until the turn is acknowledged (the
// server transcribes an id once: a re-sent utterance it already has is a duplicate).

using System;
using System.IO;
using Newtonsoft.Json;
using Newtonsoft.Json.Linq;

namespace Samvad.Client
{
    public sealed partial class SamvadClient
    {
        /// <summary>Microphone samples are PCM16 mono at this rate.</summary>
        public const int MicrophoneRate = 16000;

        /// <summary>Start streaming one utterance (barge-in: the server stops the vendor's voice).</summary>
        public MicrophoneStream BeginUtterance(string id = null, string language = null)
        {
            id = CheckId(id, "u");
            return new MicrophoneStream(this, id, StartStream(id, "start", language), language);
        }

        /// <summary>One whole utterance (PCM16 mono 16 kHz) as a `clip`: kept and re-sent until
        /// acknowledged; <see cref="PendingFrame.Reply"/> completes with the vendor's answer.</summary>
        public PendingFrame SendUtterance(byte[] pcm16, string id = null, string language = null,
                                          Action<AckResult> onAck = null)
        {
            if (pcm16 == null) throw new ArgumentNullException("pcm16");
            id = CheckId(id, "u");
            return Track(new PendingFrame(id, "audio", ClipJson(id, pcm16, language), onAck));
        }

        internal PendingFrame EndUtterance(MicrophoneStream stream, byte[] whole)
        {
            var end = AudioFrame(stream.Id, "end");
            var frame = new PendingFrame(stream.Id, "audio", ClipJson(stream.Id, whole, stream.Language), null);
            lock (_gate)
            {
                if (_stoppedBecause != null)
                {
                    frame.Fail(_stoppedBecause);
                    return frame;
                }
                _unacked.Add(frame);
                _awaitingReply[frame.Id] = frame;
                if (_live && _current != null)
                {
                    // The same connection heard the start and the chunks: `end` finishes it. Otherwise
                    // the chunks were lost with the old socket and the whole clip goes instead.
                    _current.Enqueue(stream.Connection == _connectionNumber ? end.ToString(Formatting.None) : frame.Json);
                    frame.Attempts++;
                    _stats.FramesSent++;
                }
            }
            return frame;
        }

        internal bool SendChunk(MicrophoneStream stream, byte[] pcm, int count)
        {
            var frame = AudioFrame(stream.Id, "chunk");
            frame["data"] = Convert.ToBase64String(pcm, 0, count);
            lock (_gate)
            {
                if (stream.Connection != _connectionNumber) return false;  // the clip will carry it
                return SendLiveLocked(frame.ToString(Formatting.None));
            }
        }

        bool SendLiveLocked(string json)
        {
            if (!_live || _current == null) return false;
            _current.Enqueue(json);
            _stats.FramesSent++;
            return true;
        }

        /// <summary>An `audio` frame of stream `id` (its `event`), to add the rest to.</summary>
        internal static JObject AudioFrame(string id, string audioEvent)
        {
            var frame = new JObject();
            frame["type"] = "audio";
            frame["id"] = id;
            frame["event"] = audioEvent;
            return frame;
        }

        /// <summary>Send the frame that opens a PCM16 stream (`start`, or `open` for an open
        /// microphone) on the live socket; the socket's number, which the stream's chunks must match.</summary>
        int StartStream(string id, string audioEvent, string language)
        {
            var frame = AudioFrame(id, audioEvent);
            frame["format"] = "pcm16";
            if (language != null) frame["language"] = language;
            lock (_gate)
            {
                SendLiveLocked(frame.ToString(Formatting.None));
                return _connectionNumber;
            }
        }

        static string ClipJson(string id, byte[] pcm16, string language)
        {
            var frame = AudioFrame(id, "clip");
            frame["format"] = "wav";
            frame["data"] = Convert.ToBase64String(Wav.FromPcm16(pcm16, MicrophoneRate));
            if (language != null) frame["language"] = language;
            return frame.ToString(Formatting.None);
        }
    }

    /// <summary>PCM16 little-endian from Unity's microphone samples (-1..1 floats, clamped).</summary>
    internal static class Pcm16
    {
        public static byte[] FromSamples(float[] samples, int offset, int count)
        {
            var bytes = new byte[count * 2];
            for (int i = 0; i < count; i++)
            {
                float s = Math.Max(-1f, Math.Min(1f, samples[offset + i]));
                short v = (short)Math.Round(s * 32767f);
                bytes[2 * i] = (byte)(v & 0xff);
                bytes[2 * i + 1] = (byte)((v >> 8) & 0xff);
            }
            return bytes;
        }
    }

    /// <summary>One utterance being spoken: write microphone samples as they come, then End.
    /// Samples are sent in chunks of at least 100 ms (the socket's frame rate limit is 20/s).</summary>
    public sealed class MicrophoneStream
    {
        const int ChunkBytes = SamvadClient.MicrophoneRate * 2 / 10;
        readonly SamvadClient _client;
        readonly MemoryStream _whole = new MemoryStream();
        readonly MemoryStream _pending = new MemoryStream();
        bool _ended;

        internal MicrophoneStream(SamvadClient client, string id, int connection, string language)
        {
            _client = client;
            Id = id;
            Connection = connection;
            Language = language;
        }

        public string Id { get; private set; }
        internal int Connection { get; private set; }
        internal string Language { get; private set; }

        /// <summary>Seconds written so far.</summary>
        public double Seconds { get { return _whole.Length / 2.0 / SamvadClient.MicrophoneRate; } }

        /// <summary>PCM16 little-endian mono 16 kHz bytes.</summary>
        public void Write(byte[] pcm16, int offset, int count)
        {
            if (_ended) throw new InvalidOperationException("the utterance has ended");
            _whole.Write(pcm16, offset, count);
            _pending.Write(pcm16, offset, count);
            if (_pending.Length >= ChunkBytes) Flush();
        }

        /// <summary>Unity's microphone samples (-1..1 floats), already mono 16 kHz.</summary>
        public void Write(float[] samples, int offset, int count)
        {
            var bytes = Pcm16.FromSamples(samples, offset, count);
            Write(bytes, 0, bytes.Length);
        }

        void Flush()
        {
            if (_pending.Length == 0) return;
            _client.SendChunk(this, _pending.GetBuffer(), (int)_pending.Length);
            _pending.SetLength(0);
        }

        /// <summary>The learner stopped speaking: the utterance is transcribed and played as a turn.</summary>
        public PendingFrame End()
        {
            if (_ended) throw new InvalidOperationException("the utterance has ended");
            Flush();
            _ended = true;
            return _client.EndUtterance(this, _whole.ToArray());
        }
    }

    /// <summary>Canonical 44-byte WAV headers for PCM16 mono.</summary>
    public static class Wav
    {
        public static byte[] FromPcm16(byte[] pcm, int rate)
        {
            using (var ms = new MemoryStream(44 + pcm.Length))
            using (var w = new BinaryWriter(ms))
            {
                w.Write(new[] { (byte)'R', (byte)'I', (byte)'F', (byte)'F' });
                w.Write(36 + pcm.Length);
                w.Write(new[] { (byte)'W', (byte)'A', (byte)'V', (byte)'E', (byte)'f', (byte)'m', (byte)'t', (byte)' ' });
                w.Write(16);
                w.Write((short)1);
                w.Write((short)1);
                w.Write(rate);
                w.Write(rate * 2);
                w.Write((short)2);
                w.Write((short)16);
                w.Write(new[] { (byte)'d', (byte)'a', (byte)'t', (byte)'a' });
                w.Write(pcm.Length);
                w.Write(pcm);
                w.Flush();
                return ms.ToArray();
            }
        }
    }
}

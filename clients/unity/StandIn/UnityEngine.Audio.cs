// A STAND-IN FOR TESTS, NEVER SHIPPED TO UNITY (see UnityEngine.cs): AudioSource, AudioClip,
// AudioSettings and Microphone. The microphone records in real time what a test says into it
// (UnityStandIn.MicrophoneInput), silence otherwise; UnityStandIn.AudioThread plays every playing
// AudioSource by calling the OnAudioFilterRead of the MonoBehaviours on its GameObject, as Unity's
// audio thread does for a source with a script filter and no clip.

using System;
using System.Collections.Generic;
using UnityStandIn;

namespace UnityEngine
{
    public sealed class AudioClip : Object
    {
        readonly float[] _data;   // interleaved
        readonly int _channels;
        readonly int _frequency;

        AudioClip(string name, int lengthSamples, int channels, int frequency)
        {
            Rename(name);
            _data = new float[lengthSamples * channels];
            _channels = channels;
            _frequency = frequency;
        }

        public static AudioClip Create(string name, int lengthSamples, int channels, int frequency, bool stream)
        {
            if (lengthSamples <= 0 || channels <= 0 || frequency <= 0) throw new ArgumentException("AudioClip.Create: lengths must be positive");
            return new AudioClip(name, lengthSamples, channels, frequency);
        }

        public int samples { get { return _data.Length / _channels; } }
        public int channels { get { return _channels; } }
        public int frequency { get { return _frequency; } }
        public float length { get { return (float)samples / _frequency; } }

        /// <summary>Fills <paramref name="data"/> from <paramref name="offsetSamples"/>, wrapping
        /// around to the clip's start when it reads past the end (as Unity documents).</summary>
        public bool GetData(float[] data, int offsetSamples)
        {
            PlayerLoop.RequireMainThread("GetData");
            if (data == null || data.Length == 0 || offsetSamples < 0 || offsetSamples >= samples) return false;
            lock (_data)
            {
                int start = offsetSamples * _channels;
                for (int i = 0; i < data.Length; i++) data[i] = _data[(start + i) % _data.Length];
            }
            return true;
        }

        internal void Write(float[] source, int from, int count, int at)
        {
            lock (_data)
            {
                for (int i = 0; i < count; i++) _data[(at + i) % _data.Length] = source[from + i];
            }
        }
    }

    public sealed class AudioSource : Behaviour
    {
        bool _loop;
        AudioClip _clip;
        float _volume = 1f;
        internal volatile bool Playing;
        internal readonly OutputMeter Meter = new OutputMeter();

        public bool loop
        {
            get { PlayerLoop.RequireMainThread("get_loop"); return _loop; }
            set { PlayerLoop.RequireMainThread("set_loop"); _loop = value; }
        }

        public AudioClip clip
        {
            get { PlayerLoop.RequireMainThread("get_clip"); return _clip; }
            set { PlayerLoop.RequireMainThread("set_clip"); _clip = value; }
        }

        public float volume
        {
            get { PlayerLoop.RequireMainThread("get_volume"); return _volume; }
            set { PlayerLoop.RequireMainThread("set_volume"); _volume = Mathf.Clamp01(value); }
        }

        public bool isPlaying { get { PlayerLoop.RequireMainThread("get_isPlaying"); return Playing; } }
        public void Play() { PlayerLoop.RequireMainThread("Play"); Playing = true; }
        public void Stop() { PlayerLoop.RequireMainThread("Stop"); Playing = false; }
    }

    public sealed class AudioSettings
    {
        internal static volatile int OutputRate = 48000;

        public static int outputSampleRate { get { return OutputRate; } }
    }

    public sealed class Microphone
    {
        internal const string DefaultDevice = "Stand-in Microphone";

        static readonly object Gate = new object();
        static AudioClip _clip;
        static bool _recording;
        static bool _loop;
        static double _startedAt;
        static long _recorded;   // samples written since Start

        public static string[] devices { get { return new[] { DefaultDevice }; } }

        static bool Known(string deviceName)
        {
            return string.IsNullOrEmpty(deviceName) || deviceName == DefaultDevice;
        }

        public static AudioClip Start(string deviceName, bool loop, int lengthSec, int frequency)
        {
            PlayerLoop.RequireMainThread("Microphone.Start");
            if (!Known(deviceName))
            {
                Debug.LogError("Microphone.Start: no device named " + deviceName);
                return null;
            }
            lock (Gate)
            {
                _clip = AudioClip.Create("Microphone", lengthSec * frequency, 1, frequency, false);
                _recording = true;
                _loop = loop;
                _startedAt = PlayerLoop.RealSeconds();
                _recorded = 0;
                return _clip;
            }
        }

        public static void End(string deviceName)
        {
            PlayerLoop.RequireMainThread("Microphone.End");
            if (!Known(deviceName)) return;
            lock (Gate)
            {
                Advance();
                _recording = false;
            }
        }

        /// <summary>Where the device is writing in the clip, in samples (it wraps when looping).</summary>
        public static int GetPosition(string deviceName)
        {
            PlayerLoop.RequireMainThread("Microphone.GetPosition");
            if (!Known(deviceName)) return 0;
            lock (Gate)
            {
                if (_clip == null) return 0;
                Advance();
                return (int)(_recorded % _clip.samples);
            }
        }

        // The device has recorded until now: what the test said (MicrophoneInput), silence after it.
        static void Advance()
        {
            if (!_recording) return;
            long due = (long)((PlayerLoop.RealSeconds() - _startedAt) * _clip.frequency);
            if (!_loop) due = Math.Min(due, _clip.samples);
            int count = (int)Math.Min(due - _recorded, _clip.samples);
            if (count <= 0) return;
            var chunk = new float[count];
            MicrophoneInput.Take(chunk);
            _clip.Write(chunk, 0, count, (int)(_recorded % _clip.samples));
            _recorded = due;
            if (!_loop && _recorded >= _clip.samples) _recording = false;
        }
    }
}

namespace UnityStandIn
{
    /// <summary>What a playing AudioSource sent to the speakers (test hook, not Unity API).</summary>
    public sealed class OutputMeter
    {
        readonly object _gate = new object();
        long _frames;
        long _loudFrames;
        float _peak;

        /// <summary>Frames rendered, frames with any sample louder than -60 dBFS, and the peak.</summary>
        public long Frames { get { lock (_gate) return _frames; } }
        public long LoudFrames { get { lock (_gate) return _loudFrames; } }
        public float Peak { get { lock (_gate) return _peak; } }

        internal void Add(float[] data, int channels)
        {
            lock (_gate)
            {
                for (int i = 0; i + channels <= data.Length; i += channels)
                {
                    bool loud = false;
                    for (int c = 0; c < channels; c++)
                    {
                        float a = Math.Abs(data[i + c]);
                        if (a > 0.001f) loud = true;
                        if (a > _peak) _peak = a;
                    }
                    _frames++;
                    if (loud) _loudFrames++;
                }
            }
        }
    }

    /// <summary>What the person in front of the stand-in microphone says (test hook, not Unity API).</summary>
    public static class MicrophoneInput
    {
        static readonly Queue<float> Pending = new Queue<float>();

        /// <summary>Queues samples at the rate the recording was started with; the device records them
        /// in real time, then silence.</summary>
        public static void Say(float[] samples)
        {
            lock (Pending) foreach (var s in samples) Pending.Enqueue(s);
        }

        /// <summary>Samples said but not yet recorded.</summary>
        public static int Unrecorded { get { lock (Pending) return Pending.Count; } }

        internal static void Take(float[] into)
        {
            lock (Pending)
            {
                for (int i = 0; i < into.Length; i++) into[i] = Pending.Count > 0 ? Pending.Dequeue() : 0f;
            }
        }
    }
}
